"""The fix a provider's refusal names: which config key to check for a refused key, a wrong
address or model, a request too large for the server. One sentence, appended to the error."""

from __future__ import annotations


def refusal_advice(category: str, status: int | None, provider_id: str, model: str, env_key: str | None) -> str:
    """What to check for a permanent refusal (empty when the error says enough by itself)."""
    key = f"provider.{provider_id}.options.apiKey" + (f" (or {env_key})" if env_key else "")
    if category == "auth" and status == 401:
        return f"The server refused the key: check {key}."
    if category == "auth":
        return f"The server refused this key access: check {key} and that it may use model {model!r}."
    if category == "not_found":
        return (
            f"Check provider.{provider_id}.options.baseURL (the API's root: …/v1 for the OpenAI APIs, the "
            f"server alone for Anthropic's) and the model name {model!r}."
        )
    if category == "too_large":
        return (
            "The request is larger than the server (or a proxy before it) accepts: send fewer or smaller "
            "images, or go on in a new session (the history is what makes a request grow)."
        )
    return ""
