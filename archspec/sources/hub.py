"""Hugging Face Hub ids as MODELs: `org/name`, `org/name@REV`, `org/name:FILE_OR_QUANT`.

Through huggingface_hub (the optional extra `[hub]`), honouring HF_ENDPOINT, HF_HUB_OFFLINE, HF_TOKEN
and the shared cache (HF_HOME, HF_HUB_CACHE), read when a command runs. Only what a command needs is
fetched: the repository's file list (one API call), `config.json` (into the hub's own cache), and the
safetensors headers by one range request per shard (the index first where there is one); never the
weights. What was read is kept under HF_HOME/archspec (a record per repository and commit, written
whole or not at all, and only once the model it describes resolved), so that a model read once
online answers offline.
"""

from __future__ import annotations

import json
import os
import re
from dataclasses import dataclass, field
from pathlib import Path

from archspec.core.errors import SpecError, clip
from archspec.sources.headers import INDEX, header_length, parse_header
from archspec.sources.stored import StoredTensor

# a repository id: one '/' between two names of letters, digits, '-', '_', '.' (the Hub's own rule),
# then an optional @REVISION and :FILE_OR_QUANT
_ID = re.compile(r"^([A-Za-z0-9][\w.-]{0,95})/([\w.-]{1,96})(?:@([^:@\s]+))?(?::([^:@\s/]+))?$")
FIRST_RANGE = 1 << 19  # bytes asked of a shard first: its whole header but for rare giants (then one more)
RECORD_FORMAT = 1
EXTRA = "pip install 'archspec-transformers[hub]'"


@dataclass(frozen=True)
class HubRef:
    repo: str
    revision: str | None = None
    pick: str | None = None  # a GGUF file name or quantisation (Q4_K_M)

    def __str__(self) -> str:
        return self.repo + (f"@{self.revision}" if self.revision else "") + (f":{self.pick}" if self.pick else "")


def parse_ref(ref: str) -> HubRef | None:
    """The Hub id `ref` names, or None where it is not one."""
    m = _ID.match(ref)
    if not m or m.group(2).endswith((".json", ".toml", ".yaml", ".yml", ".safetensors", ".gguf")):
        return None
    if ".." in ref or m.group(1).endswith((".", "-")):
        return None
    return HubRef(f"{m.group(1)}/{m.group(2)}", m.group(3), m.group(4))


def _env(name: str) -> str | None:
    value = os.environ.get(name)
    return value if value else None


def offline() -> bool:
    return (_env("HF_HUB_OFFLINE") or "").upper() in ("1", "ON", "YES", "TRUE")


def hf_home() -> Path:
    if _env("HF_HOME"):
        return Path(os.environ["HF_HOME"]).expanduser()
    base = Path(_env("XDG_CACHE_HOME") or Path.home() / ".cache").expanduser()
    return base / "huggingface"


def hub_cache() -> Path:
    return Path(_env("HF_HUB_CACHE") or hf_home() / "hub").expanduser()


def endpoint() -> str:
    return (_env("HF_ENDPOINT") or "https://huggingface.co").rstrip("/")


def _token() -> str | None:
    return _env("HF_TOKEN")


@dataclass
class Fetched:
    """What the Hub holds of one repository at one commit: its config file (in the hub's cache), the
    checkpoint files read and their stored tensors; `save()` keeps it for offline use."""

    ref: HubRef
    commit: str
    config: Path
    files: tuple[str, ...]
    tensors: tuple[StoredTensor, ...]
    format: str  # "safetensors", "gguf" or "config" (no weights in the repository)
    requests: dict[str, int] = field(default_factory=dict)  # header requests per file (this call)
    cached: bool = False
    gguf_header: Path | None = None  # a GGUF file's header bytes, kept beside the record
    gguf_header_bytes: bytes | None = None  # read from the Hub this call, written by save()

    def save(self) -> None:
        if self.cached:
            return
        data = {
            "format": RECORD_FORMAT,
            "repo": self.ref.repo,
            "commit": self.commit,
            "kind": self.format,
            "files": list(self.files),
            "tensors": [[t.name, list(t.shape), t.dtype, t.nbytes] for t in self.tensors],
        }
        if self.gguf_header_bytes is not None:  # the header first: a record is trusted only with its header
            _write(_gguf_header_path(self.ref, self.commit), self.gguf_header_bytes)
        _write(_record_path(self.ref.repo, self.commit, self.ref.pick), json.dumps(data).encode())
        if self.ref.revision != self.commit:
            _write(_ref_path(self.ref), self.commit.encode())


def _folder(repo: str) -> Path:
    return hf_home() / "archspec" / "hub" / repo.replace("/", "--")


def _record_path(repo: str, commit: str, pick: str | None) -> Path:
    return _folder(repo) / (commit + (f"--{pick}" if pick else "") + ".json")


def _ref_path(ref: HubRef) -> Path:
    return _folder(ref.repo) / "refs" / (ref.revision or "main")


def _write(path: Path, data: bytes) -> None:
    """`data` into `path` whole or not at all (a temporary file renamed over it); a cache that cannot be
    written is left alone: the command still answers, online."""
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
        tmp.write_bytes(data)
        os.replace(tmp, path)
    except OSError:
        pass


def _read_record(repo: str, commit: str, pick: str | None) -> dict | None:
    try:
        data = json.loads(_record_path(repo, commit, pick).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    ok = isinstance(data, dict) and data.get("format") == RECORD_FORMAT and data.get("commit") == commit
    return data if ok else None


def _needs(ref: HubRef | None) -> SpecError:
    here = f"{ref}: no such file or folder here; as a Hub id it needs" if ref else "a Hugging Face Hub id needs"
    return SpecError(f"{here} huggingface_hub: {EXTRA}")


def _hub(ref: HubRef | None = None):
    try:
        import huggingface_hub
    except ImportError:
        raise _needs(ref) from None
    return huggingface_hub


def _refusal(exc: Exception, ref: HubRef) -> SpecError:
    """One line for what the Hub answered."""
    hub = _hub()
    e = hub.errors
    status = getattr(getattr(exc, "response", None), "status_code", None)
    if isinstance(exc, e.GatedRepoError):
        return SpecError(
            f"{ref}: the Hub refuses access (HTTP {status}: a gated repository); accept its terms on the Hub and "
            "set HF_TOKEN to a token that may read it"
        )
    if isinstance(exc, e.RevisionNotFoundError):
        return SpecError(f"{ref}: the repository {ref.repo} has no revision {ref.revision!r}")
    if isinstance(exc, e.RepositoryNotFoundError) or status == 404:  # the Hub answers 401 to a stranger too
        private = "; if it is private, set HF_TOKEN to a token that may read it" if status in (401, 403) else ""
        return SpecError(
            f"{ref}: no such file or folder here, and no repository {ref.repo} on the Hub ({endpoint()}: "
            f"{status}){private}"
        )
    if status in (401, 403):
        return SpecError(f"{ref}: the Hub refuses access (HTTP {status}); set HF_TOKEN to a token that may read it")
    if isinstance(exc, e.HfHubHTTPError):
        return SpecError(f"{ref}: the Hub answered HTTP {status} ({clip(str(exc).splitlines()[0], 160)})")
    return SpecError(
        f"{ref}: no such file or folder here, and the Hub at {endpoint()} cannot be reached "
        f"({clip(str(exc) or type(exc).__name__, 160)}); with HF_HUB_OFFLINE=1 archspec answers from what it has read"
    )


def fetch(ref: HubRef) -> Fetched:
    """The config and stored tensors of a Hub repository, from the cache when they were read before."""
    if offline():  # from the cache alone: huggingface_hub is imported only where the cache lacks a file
        _installed(ref)
        return _from_cache(ref)
    if ref.revision and re.fullmatch(r"[0-9a-f]{40}", ref.revision):  # a commit never changes: read once, kept
        _installed(ref)
        try:
            return _from_cache(ref)
        except SpecError:
            pass
    hub = _hub(ref)
    api = hub.HfApi(endpoint=endpoint(), token=_token())
    try:
        info = api.model_info(ref.repo, revision=ref.revision, files_metadata=True)
    except Exception as exc:  # noqa: BLE001 - every failure of the call is one line for the user
        raise _refusal(exc, ref) from None
    commit = info.sha
    if not isinstance(commit, str) or not re.fullmatch(r"[0-9a-f]{40}", commit):
        raise SpecError(f"{ref}: the Hub's answer names no commit of the repository")
    sizes = {s.rfilename: s.size for s in info.siblings or []}
    if ref.pick or ("config.json" not in sizes and any(f.endswith(".gguf") for f in sizes)):
        return _gguf_fetch(ref, commit, sizes, hub)
    config = _download(ref, commit, "config.json", hub)
    record = _read_record(ref.repo, commit, ref.pick)
    if record is not None:
        return _fetched(ref, commit, config, record)
    return _read_remote(ref, commit, config, sizes, hub)


def _download(ref: HubRef, commit: str, filename: str, hub, local: bool = False) -> Path:
    try:
        path = hub.hf_hub_download(
            ref.repo,
            filename,
            revision=commit,
            cache_dir=hub_cache(),
            endpoint=endpoint(),
            token=_token(),
            local_files_only=local,
        )
    except hub.errors.LocalEntryNotFoundError:
        raise SpecError(
            f"{ref}: offline (HF_HUB_OFFLINE), and {filename} of this repository is not in the cache "
            f"({hub_cache()}); run once online"
        ) from None
    except hub.errors.EntryNotFoundError:
        raise SpecError(f"{ref}: the repository has no {filename}") from None
    except Exception as exc:  # noqa: BLE001
        raise _refusal(exc, ref) from None
    return Path(path)


def _fetched(ref: HubRef, commit: str, config: Path, record: dict) -> Fetched:
    try:
        tensors = tuple(StoredTensor(n, tuple(s), d, b) for n, s, d, b in record["tensors"])
        files = tuple(record["files"])
        kind = record["kind"]
    except (KeyError, TypeError, ValueError):
        raise SpecError(
            f"{ref}: the cached record {_record_path(ref.repo, commit, ref.pick)} is damaged; delete it"
        ) from None
    header = config if kind == "gguf" else None
    if header is not None and not header.is_file():
        record = _record_path(ref.repo, commit, ref.pick)
        raise SpecError(f"{ref}: the cached GGUF header {header} is missing; delete {record}")
    return Fetched(ref, commit, config, files, tensors, kind, cached=True, gguf_header=header)


def _installed(ref: HubRef) -> None:
    """Refuse a Hub id where huggingface_hub is not installed, without importing it."""
    import importlib.util
    import sys

    try:
        missing = (
            sys.modules.get("huggingface_hub", False) is None or importlib.util.find_spec("huggingface_hub") is None
        )
    except (ImportError, ValueError):
        missing = True
    if missing:
        raise _needs(ref)


def _snapshot(repo: str, commit: str, filename: str) -> Path:
    """Where the hub's cache keeps a file of a commit (huggingface_hub's layout: models--ORG--NAME/snapshots)."""
    return hub_cache() / f"models--{repo.replace('/', '--')}" / "snapshots" / commit / filename


def _from_cache(ref: HubRef) -> Fetched:
    revision = ref.revision or "main"
    if re.fullmatch(r"[0-9a-f]{40}", revision):
        commit = revision
    else:
        try:
            commit = _ref_path(ref).read_text(encoding="utf-8").strip()
        except OSError:
            raise SpecError(
                f"{ref}: no such file or folder here; offline (HF_HUB_OFFLINE), and archspec has not read this Hub "
                f"repository before (nothing under {_folder(ref.repo)}); run once online"
            ) from None
    record = _read_record(ref.repo, commit, ref.pick)
    if record is None:
        raise SpecError(
            f"{ref}: offline (HF_HUB_OFFLINE), and archspec has not read commit {commit[:12]} of this "
            "repository before; run once online"
        )
    if record.get("kind") == "gguf":
        return _fetched(ref, commit, _gguf_header_path(ref, commit), record)
    config = _snapshot(ref.repo, commit, "config.json")
    if not config.is_file():  # the hub's cache was cleaned: huggingface_hub says so in its words
        config = _download(ref, commit, "config.json", _hub(), local=True)
    return _fetched(ref, commit, config, record)


def _read_remote(ref: HubRef, commit: str, config: Path, sizes: dict[str, int | None], hub) -> Fetched:
    requests: dict[str, int] = {}
    if INDEX in sizes:
        from archspec.sources.headers import agree

        index_path = _download(ref, commit, INDEX, hub)
        from archspec.sources.headers import read_index

        index = read_index(index_path)
        files = sorted(set(index.values()))
        absent = [f for f in files if f not in sizes]
        if absent:
            raise SpecError(f"{ref}: the index names shard {absent[0]!r}, which the repository does not hold")
        shards = {f: _remote_header(ref, commit, f, sizes[f], hub, requests) for f in files}
        tensors = agree(index, shards, f"{ref}: {INDEX}")
        kind = "safetensors"
    else:
        files = sorted(f for f in sizes if f.endswith(".safetensors") and "/" not in f)
        tensors = [t for f in files for t in _remote_header(ref, commit, f, sizes[f], hub, requests)]
        kind = "safetensors" if files else "config"
    return Fetched(ref, commit, config, tuple(files), tuple(tensors), kind, requests)


def _remote_header(ref: HubRef, commit: str, filename: str, size: int | None, hub, requests: dict) -> list:
    """One shard's tensors by a range request (two where the header is longer than FIRST_RANGE)."""
    where = f"{ref}: {filename}"
    url = hub.hf_hub_url(ref.repo, filename, revision=commit, endpoint=endpoint())
    headers = hub.utils.build_hf_headers(token=_token())
    session = hub.utils.get_session()
    try:
        r = session.get(url, headers={**headers, "Range": f"bytes=0-{FIRST_RANGE - 1}"}, follow_redirects=True)
        requests[filename] = 1
        hub.utils.hf_raise_for_status(r)
        body = r.content
        total = _total(r.headers.get("Content-Range"), size, len(body) if r.status_code == 200 else None)
        n = header_length(body[:8], where, total)
        if len(body) < 8 + n:
            r = session.get(url, headers={**headers, "Range": f"bytes={len(body)}-{7 + n}"}, follow_redirects=True)
            requests[filename] += 1
            hub.utils.hf_raise_for_status(r)
            body += r.content
    except SpecError:
        raise
    except Exception as exc:  # noqa: BLE001
        raise _refusal(exc, ref) from None
    if len(body) < 8 + n:
        raise SpecError(f"{where}: the Hub sent {len(body):,} bytes of a {8 + n:,}-byte header (a truncated file)")
    return parse_header(body[8 : 8 + n], where, total)


def _total(content_range: str | None, listed: int | None, whole: int | None) -> int | None:
    """The file's size: from the range answer ('bytes 0-99/1234'), else the repository's listing."""
    if content_range and "/" in content_range:
        tail = content_range.rsplit("/", 1)[1]
        if tail.isdigit():
            return int(tail)
    return whole if whole is not None else listed


# ---------------------------------------------------------------- GGUF repositories

# a GGUF header holds the tokenizer's lists (Qwen3's 151,936 tokens and its merges: several MB); 16 MiB reads
# such a header in one request, a longer one takes more
GGUF_FIRST_RANGE = 1 << 24
_SHARD = re.compile(r"-(\d{5})-of-(\d{5})\.gguf$")


def pick_gguf(ref: HubRef, files: list[str]) -> list[str]:
    """The GGUF file(s) `ref` picks from a repository's files: a file name after ':', or a quantisation
    (Q4_K_M) that names one file, or one split model (-00001-of-00003.gguf ...); with no pick, the only
    GGUF file. Anything else is refused with the choices."""
    ggufs = sorted(f for f in files if f.endswith(".gguf"))
    if not ggufs:
        raise SpecError(f"{ref}: the repository holds no .gguf file")
    if ref.pick is None:
        chosen = ggufs
    elif ref.pick.endswith(".gguf"):
        chosen = [f for f in ggufs if f == ref.pick or f.rsplit("/", 1)[-1] == ref.pick]
    else:
        word = re.compile(rf"(?i)(?:^|[-_.]){re.escape(ref.pick)}(?:[-_.]|$)")
        chosen = [f for f in ggufs if word.search(f.rsplit("/", 1)[-1].removesuffix(".gguf"))]
    models = {_SHARD.sub(".gguf", f) for f in chosen}
    if len(models) != 1:
        quants = sorted({_quant(f) for f in ggufs})
        what = "names no GGUF file" if not chosen else f"names {len(models)} GGUF files"
        what = f"{what} in the repository" if ref.pick else "the repository holds several GGUF files"
        raise SpecError(f"{ref}: {what}"
                        f"; pick one with :QUANT or :FILE, e.g. {ref.repo}:{quants[0]} (it holds: "
                        f"{clip(', '.join(quants), 200)})")  # fmt: skip
    return chosen


def _quant(filename: str) -> str:
    """'Qwen3-8B-Q4_K_M.gguf' -> 'Q4_K_M': the last dash-separated word of a GGUF file's name."""
    return _SHARD.sub(".gguf", filename).rsplit("/", 1)[-1].removesuffix(".gguf").rsplit("-", 1)[-1]


def _gguf_header_path(ref: HubRef, commit: str) -> Path:
    return _record_path(ref.repo, commit, ref.pick).with_suffix(".gguf-header")


def _gguf_fetch(ref: HubRef, commit: str, sizes: dict[str, int | None], hub) -> Fetched:
    """A GGUF file of the repository: its header by range requests (kept beside the record), its tensors;
    a split model's tensors from every shard's header."""
    from archspec.sources import gguf

    record = _read_record(ref.repo, commit, ref.pick)
    if record is not None and record.get("kind") == "gguf" and _gguf_header_path(ref, commit).is_file():
        return _fetched(ref, commit, _gguf_header_path(ref, commit), record)
    files = pick_gguf(ref, list(sizes))
    requests: dict[str, int] = {}
    first, tensors = b"", []
    for name in files:
        data, header = _remote_gguf_header(ref, commit, name, sizes.get(name), hub, requests)
        first = first or data
        tensors += gguf.stored_tensors(header, f"{ref}: {name}")
    fetched = Fetched(ref, commit, _gguf_header_path(ref, commit), tuple(files), tuple(tensors), "gguf", requests)
    fetched.gguf_header_bytes = first
    return fetched


def _remote_gguf_header(ref: HubRef, commit: str, filename: str, size: int | None, hub, requests: dict):
    """A GGUF file's header bytes and parsed header, by range requests: GGUF_FIRST_RANGE bytes, then as
    many more as the parser says it needs (at least doubling)."""
    from archspec.sources import gguf
    from archspec.sources.gguf_header import Truncated, parse_header

    where = f"{ref}: {filename}"
    url = hub.hf_hub_url(ref.repo, filename, revision=commit, endpoint=endpoint())
    headers = hub.utils.build_hf_headers(token=_token())
    session = hub.utils.get_session()
    body, total, want = b"", size, GGUF_FIRST_RANGE
    while True:
        if total is not None and len(body) >= total:
            raise SpecError(f"{where}: the file ends ({total:,} bytes) inside its GGUF header (a truncated file)")
        try:
            r = session.get(url, headers={**headers, "Range": f"bytes={len(body)}-{want - 1}"}, follow_redirects=True)
            requests[filename] = requests.get(filename, 0) + 1
            hub.utils.hf_raise_for_status(r)
        except Exception as exc:  # noqa: BLE001
            raise _refusal(exc, ref) from None
        body = body + r.content if r.status_code == 206 else r.content
        total = _total(r.headers.get("Content-Range"), total, len(body) if r.status_code == 200 else None)
        try:
            header = parse_header(body, where, total)
        except Truncated as exc:
            want = max(exc.needed, 2 * len(body))
            continue
        if total is not None:
            gguf.check_data(header, total, where)
        return bytes(body[: header.data_offset]), header
