"""Every stage as a library function of its typed options, callable from Python.

    from sweet_rl.stages.simulate import SimulateOptions, simulate
    simulate(SimulateOptions(output_path="outputs/demo.jsonl", max_new_tokens=32))

One module per stage holds its options (a dataclass of flags, :mod:`sweet_rl.flags`) and its
function: ``download_data``, ``prepare_frontend_tasks``, ``filter_websites``, ``simulate``,
``evaluate_code``, ``evaluate_html``, ``sample``, ``rank``, ``pairs``, ``train_dpo`` and
``train_sft`` (:mod:`.train`), ``merge``. The option groups several stages share are in
:mod:`.groups`; the skeleton sample and rank share in :mod:`.chunked`; the one evaluate_code
and evaluate_html share in :mod:`.evaluation`. ``sweet_rl/cli/`` only reads command lines into
these options; nothing heavy is imported until a stage runs.
"""
