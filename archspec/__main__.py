from archspec.cli import entry

entry()
