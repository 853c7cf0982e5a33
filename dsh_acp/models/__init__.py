"""The model seam and the models behind it: the OpenAI-compatible client, the scripted model,
where the model and its key come from, and what a request cost."""

__all__: list[str] = []
