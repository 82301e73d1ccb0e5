"""An app that stores zemcp's audit records in a table and lists them in the admin."""
