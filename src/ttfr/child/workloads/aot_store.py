"""Compiled programs kept in the case's AOT directory, loaded by a later run instead of
compiled again: the loop strategies' `aot` and the mass scan's executables."""

from __future__ import annotations

import os


def _code_digest(modules) -> str:
    """The modules whose code the executables compile, hashed: an edit to them makes new file
    names, so an executable of older code is never loaded."""
    import hashlib

    digest = hashlib.sha256()
    for module in modules:
        with open(module.__file__, "rb") as source:
            digest.update(source.read())
    return digest.hexdigest()[:12]


class AheadOfTimeStore:
    """Compiled programs kept in the AOT directory (TTFR_AOT_DIR, one of the case's cache
    directories, so the cache policies empty or fill it), one file per key:
    `get(key, load, build)` returns `load(path)` for a stored one, or `build(tmp)`, which
    compiles and writes the file at `tmp` (None: no directory, keep it in memory), then moves
    it into place. File names carry `stem` (the runtime's versions and platform) and a hash
    of `sources`, the modules whose code is compiled: an edit never loads an older program.
    A file that cannot be loaded costs a compile, never the run."""

    def __init__(self, stem: str, suffix: str, sources=()):
        self.directory = os.environ.get("TTFR_AOT_DIR") or None
        self.stem, self.suffix = f"{stem}-{_code_digest(sources)}", suffix
        self.loaded = 0

    def get(self, key: str, load, build):
        path = os.path.join(self.directory, f"{self.stem}-{key}{self.suffix}") if self.directory else None
        if path and os.path.exists(path):
            try:
                program = load(path)
            except Exception:  # noqa: BLE001 - a stale or damaged file costs a compile, never the run
                program = None
            if program is not None:
                self.loaded += 1
                return program
        if not path:
            return build(None)
        os.makedirs(self.directory, exist_ok=True)
        tmp = f"{path}.tmp{self.suffix}"
        program = build(tmp)
        os.replace(tmp, path)
        return program


class JaxExecutables(AheadOfTimeStore):
    """Compiled JAX executables, made and loaded as the `jax_serialized` artifacts are
    (ttfr.child.precompiled.JaxSerialized): `get(key, compile)` loads the one stored under `key`,
    or calls `compile()` (trace, lower, compile: nothing of it is needed for a load) and stores
    it; for the jax, jaxlib and platform compiled for."""

    def __init__(self, jax, device, stem: str, sources=()):
        import jaxlib

        super().__init__(f"{stem}-jax{jax.__version__}-jaxlib{jaxlib.__version__}-{device.platform}", ".xla", sources)

    def get(self, key: str, compile):
        return super().get(key, self._load, lambda tmp: self._store(compile(), tmp))

    @staticmethod
    def _store(executable, tmp):
        if tmp:
            from ttfr.child.precompiled import JaxSerialized, framed

            with open(tmp, "wb") as blob:
                blob.write(framed(JaxSerialized.dumps(executable)))
        return executable

    @staticmethod
    def _load(path):
        from ttfr.child.precompiled import JaxSerialized, unframed

        with open(path, "rb") as blob:  # written by this case's own earlier run (its cache directory)
            return JaxSerialized.loads(unframed(blob.read(), path))
