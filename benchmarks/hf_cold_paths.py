"""Cold HistFactory with JAX: how close each thing a user can cut gets to NextStat's cold
figure. One process each, measured by ttfr itself (`ttfr run --command ... --first-result-mark`
under the cold-cache and warm-cache policies, so ttfr points JAX's persistent cache at an empty
or a primed directory and verifies it by its files), beside ttfr's own native JAX and NextStat
cases of hf_nll_grad:

- trace: import JAX, read the workspace, build the model, jit hf_nll_grad's call and run it
  once (trace, lower, compile or load from the persistent cache, execute);
- export: the same, but the call is a `jax.export` serialization made beforehand: ttfr's code
  is not traced, the exported StableHLO is wrapped, lowered and compiled (or loaded from the cache);
- executable: the compiled executable itself, serialized beforehand
  (`jax.experimental.serialize_executable`) and loaded: nothing is traced, lowered or compiled.

    .venv/bin/python benchmarks/hf_cold_paths.py [preset] [cold-runs]
"""

import json
import os
import shlex
import subprocess
import sys
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve()
JAX_CACHE = {"JAX_PERSISTENT_CACHE_MIN_COMPILE_TIME_SECS": "0", "JAX_PERSISTENT_CACHE_MIN_ENTRY_SIZE_BYTES": "-1"}


def _problem(workdir: Path):
    from ttfr.child.workloads.histfactory import problems

    meta = json.loads((workdir / "meta.json").read_text())
    return problems.Problem((workdir / "workspace.json").read_bytes(), json.loads((workdir / "point.json").read_text()),
                            tuple(meta["signal"]))  # fmt: skip


def _call(workdir: Path):
    """hf_nll_grad's JAX function and arguments, built as the worker builds them."""
    import jax

    jax.config.update("jax_enable_x64", True)
    jax.config.update("jax_cpu_enable_async_dispatch", False)
    from ttfr.child.workloads import hf_nll_grad
    from ttfr.child.workloads.histfactory import native_inputs

    inputs = [jax.numpy.asarray(x) for x in native_inputs.dense_inputs(_problem(workdir))[1]]
    return jax, hf_nll_grad.jax_build(jax, inputs)


def child(mode: str, workdir: Path) -> None:
    """One measured process (run by ttfr as a command); its first result is marked."""
    import ttfr_mark

    jax, (function, args) = _call(workdir)
    if mode == "export":
        from jax import export

        exported = export.deserialize(bytearray((workdir / "hf_nll_grad.jax_export").read_bytes()))
        output = exported.call(*args)
    elif mode == "executable":
        import pickle

        from jax.experimental import serialize_executable

        payload, in_tree, out_tree = pickle.loads((workdir / "hf_nll_grad.executable").read_bytes())
        output = serialize_executable.deserialize_and_load(payload, in_tree, out_tree)(*args)
    else:
        output = jax.jit(function)(*args)
    jax.block_until_ready(output)
    ttfr_mark.first_result()


def prepare(workdir: Path, preset: str) -> None:
    from jax import export

    from ttfr.child.workloads.histfactory import workspace as hf_workspace
    from ttfr.measure import datasets

    spec = hf_workspace.preset(preset, 0)
    files = datasets.files(datasets.Workspace(preset, 0, hf_workspace.find_signal(spec), spec), 0)
    (workdir / "workspace.json").write_bytes(files["workspace"][1])
    (workdir / "point.json").write_bytes(files["point"][1])
    (workdir / "meta.json").write_text(json.dumps({"signal": list(hf_workspace.find_signal(spec))}))
    jax, (function, args) = _call(workdir)
    blob = export.export(jax.jit(function))(*args).serialize()
    (workdir / "hf_nll_grad.jax_export").write_bytes(blob)
    import pickle

    from jax.experimental import serialize_executable

    compiled = jax.jit(function).lower(*args).compile()
    (workdir / "hf_nll_grad.executable").write_bytes(pickle.dumps(serialize_executable.serialize(compiled)))


def main(preset: str, cold_runs: int) -> None:
    ttfr = str(Path(sys.executable).with_name("ttfr"))
    size = {"complex8p": 8, "mid72p": 72, "thu184p": 184}[preset]
    with tempfile.TemporaryDirectory() as scratch:
        workdir = Path(scratch)
        prepare(workdir, preset)
        env = {**os.environ, **JAX_CACHE}
        commands = []
        for mode in ("trace", "export", "executable"):
            commands += ["--command", shlex.join([sys.executable, str(HERE), "--child", mode, str(workdir)]),
                         "--command-name", f"hf_jax_{mode}"]  # fmt: skip
        runs = [
            [ttfr, "run", *commands, "--first-result-mark", "--cache-policy", "cold-cache,warm-cache"],
            [ttfr, "run", "--cases", f"jax_jit_cpu_hf_nll_grad_{size}_f64,nextstat_hf_nll_grad_{size}_f64",
             "--cache-policy", "cold-cache,warm-cache"],
        ]  # fmt: skip
        for argv in runs:
            out = workdir / f"results-{len(list(workdir.glob('results-*')))}"
            subprocess.run([*argv, "--cold-runs", str(cold_runs), "--no-html", "--out", str(out)], env=env, check=False)


if __name__ == "__main__":
    if len(sys.argv) > 1 and sys.argv[1] == "--child":
        child(sys.argv[2], Path(sys.argv[3]))
    else:
        main(sys.argv[1] if len(sys.argv) > 1 else "complex8p", int(sys.argv[2]) if len(sys.argv) > 2 else 5)
