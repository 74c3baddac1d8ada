"""Agents: transformers (``hf``), vLLM (``vllm``) and OpenAI-compatible (``openai``) backends."""
