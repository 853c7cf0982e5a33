"""Who may run what: permission modes, remembered approvals and the shell-command reader
their rules are keyed on."""

__all__: list[str] = []
