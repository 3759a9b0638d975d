"""What the benchmark scripts share (bench/*.py import it as `lib`: a script's own folder is
first on sys.path). One module per purpose; none imports torch or deepspeed at import time (only
tokenizer_styles needs a package: tokenizers), so a launcher, a worker in the DeepSpeed venv and
ctest's system Python can all import it. bench/lib/test_lib.py checks it (by hand, not in ctest).

    rounds        the interleaved-rounds loop, the order rotated by the round
    stats         the median (of values, of runs' figures), and the median of per-round ratios
    cpu           the CPU line the tables name the machine with
    peer_envs     the pinned venv and the DeepSpeed venv (made on first use)
    procs         running a process group with a timeout, and the line that says why it failed
    ports         a free local port, held until the process exits
    proc_stats    a rank's own figures from /proc (start time, RSS, resettable peak)
    gpt_py        zerotrain's built-in GPT and synthetic data in Python, for the Python peers
    ds_config     the DeepSpeed config the GPT benchmarks give zerotrain and DeepSpeed alike
    hf_trainer_runs  one run of bench/hf_trainer_worker.py under either launcher
    tokenizer_styles the GPT-2/Llama-style tokenizers trained offline for the throughput bench
    formatting    table cells: a value or "n/a", and the peers' versions
    docs_tables   putting a generated table into docs/*.md between its markers
"""
