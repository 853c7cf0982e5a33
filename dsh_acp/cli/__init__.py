"""The ``dsh-acp`` command: serving on stdio (through ``dsh_acp.launch``), the helper commands,
the tool catalog and the demo."""

__all__: list[str] = []
