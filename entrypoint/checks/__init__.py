"""One module per check family; each check is a function of the paths and values it reads."""
