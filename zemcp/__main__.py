"""``python -m zemcp run TARGET``: the same as the ``zemcp`` command (:mod:`zemcp.cli.serve`)."""

from zemcp.cli.serve import main

main(prog_name="zemcp")
