"""The ``dsh-acp`` command: serving on stdio, the tool catalog and the demo."""

__all__: list[str] = []
