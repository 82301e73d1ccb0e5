"""Integration tests of deploy/: the real HAProxy and nginx in front of three zemcp instances."""
