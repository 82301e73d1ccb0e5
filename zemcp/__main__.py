"""``python -m zemcp run TARGET``: the same as the ``zemcp`` command (:mod:`zemcp.serve`)."""

from zemcp.serve import main

main(prog_name="zemcp")
