"""Human simulators: an OpenAI-compatible HTTP client, in-process local models and a
scripted rule-based human (no model)."""
