"""Test-only code: fakes, local clusters and models shared by test areas; never shipped."""
