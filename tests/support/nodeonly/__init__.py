"""A test system whose holder client imports a module only its nodes would have (issue 28): the
controller must list, load and ship it without importing the client."""
