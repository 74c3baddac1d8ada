"""Human simulators: an OpenAI-compatible HTTP client and an in-process local model."""
