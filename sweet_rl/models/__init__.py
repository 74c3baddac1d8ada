"""How the project reaches language models: clients and engines, below the agents and simulators.

:mod:`.hf_generation` (batched transformers generation, each row sampled from its own
generator), :mod:`.vllm_engine` (everything the code asks of vLLM, and how its versions
differ), :mod:`.openai_compat` (the client of OpenAI-compatible chat servers, with its failure
policy), :mod:`.chat_images` (images inside chat messages as data URLs), and the embedded
default models built locally without a download, :mod:`.tiny_model` (a tiny Llama) and
:mod:`.tiny_vlm` (a tiny Qwen2-VL). Nothing here imports the agents, the simulators or the
stages that use them.
"""
