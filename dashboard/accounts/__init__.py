"""People: login, logout and (with the actions issue) the viewer / operator / admin roles."""
