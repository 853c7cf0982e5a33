"""reference_tools: bash and file-system tools that render well and are safe to run."""

__all__: list[str] = []
