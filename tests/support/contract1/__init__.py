"""A third party's adapter written for adapter contract 1 (before RoleSpec, HolderClientCode and
the harness-started agents), kept unchanged as a fixture: loading it must fail with the one-line
migration message of :mod:`systems.upgrade`, not a traceback. Not importable on contract 2."""
