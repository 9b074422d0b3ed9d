"""The npm package `trellis-llm` (web/package.json): its folder and `npm pack` tarball under build/npm.

    build/npm/trellis-llm/     package.json (version from pyproject.toml) and the files it lists:
                               the JS API, its types, the worker, the grammar glue and wasm, trellis.zip
    build/npm/trellis-llm-<version>.tgz

Pyodide is a dependency (the `pyodide` npm package), not a copy; models are not in the package (a page
serves built model folders and names them with modelBase / appConfig.model_list). Generated files (the
wasm, trellis.zip) are made here, never committed.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import tomllib
from pathlib import Path

from web.site import DEFAULT_GRAMMAR_WASM, ROOT, SUBGROUP_PROBE, WEB, SiteError, package_archive

# Files of the package that come from web/ as they are; the others are generated (GENERATED).
SOURCES = ("trellis.js", "trellis.d.ts", "webllm.js", "webllm.d.ts", "worker.js", "grammar.js")
GENERATED = ("trellis_grammar.wasm", "trellis.zip", "subgroup_probe.wgsl", "README.md")


def manifest() -> dict:
    """web/package.json with pyproject.toml's version (one version for the wheel and the package)."""
    meta = json.loads((WEB / "package.json").read_text())
    meta["version"] = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["version"]
    listed, made = set(meta["files"]), set(SOURCES) | set(GENERATED)
    if listed != made:
        raise SiteError(f"web/package.json's files {sorted(listed)} differ from what npm_package makes {sorted(made)}")
    return meta


README = """# trellis-llm

Trellis in the browser: an LLM engine (WebGPU kernels, the `trellis` Python package under Pyodide)
whose structured output always matches its JSON Schema, grammar or regex, behind OpenAI / web-llm's API.

    import { CreateEngine } from 'trellis-llm';
    const engine = await CreateEngine('/models/my-model/', {
      assetBase: '/node_modules/trellis-llm/',   // where this package's files are served
      pyodideBase: '/node_modules/pyodide/',     // where the pyodide package's files are served
    });

`trellis-llm/webllm` has web-llm's names (CreateMLCEngine, MLCEngine, CreateWebWorkerMLCEngine, ...).
Models are folders built by `python3 build.py model` in the Trellis repository. See its README.
"""


def build_package(out: Path, grammar_wasm: Path = DEFAULT_GRAMMAR_WASM) -> Path:
    """The package folder `out` (replaced)."""
    meta = manifest()
    if not Path(grammar_wasm).exists():
        raise SiteError(f"{grammar_wasm} is missing (run `python3 build.py grammar`)")
    if out.exists():
        shutil.rmtree(out)
    out.mkdir(parents=True)
    for name in SOURCES:
        shutil.copy2(WEB / name, out / name)
    shutil.copy2(grammar_wasm, out / "trellis_grammar.wasm")
    shutil.copy2(SUBGROUP_PROBE, out / SUBGROUP_PROBE.name)
    package_archive(out / "trellis.zip")
    (out / "README.md").write_text(README)
    (out / "package.json").write_text(json.dumps(meta, indent=2) + "\n")
    return out


def pack(folder: Path) -> Path:
    """`npm pack` of the package folder, into its parent; returns the tarball."""
    folder = Path(folder).resolve()
    result = subprocess.run(["npm", "pack", "--json", "--pack-destination", str(folder.parent)], cwd=folder,
                            check=True, capture_output=True, text=True)
    return folder.parent / json.loads(result.stdout)[0]["filename"]
