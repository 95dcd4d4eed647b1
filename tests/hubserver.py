"""A local stand-in for the Hugging Face Hub on 127.0.0.1, for tests without a network.

It answers the routes the real huggingface_hub client uses for what archspec asks:

- `GET /api/models/{repo}` and `/api/models/{repo}/revision/{rev}`: the repository's commit and file list
  (with sizes, as `?blobs=true` asks);
- `HEAD` and `GET /{repo}/resolve/{rev}/{file}`: a file, whole or by `Range: bytes=a-b` (206 with
  Content-Range), with the headers hf_hub_download reads (ETag, X-Repo-Commit, Content-Length);
- 404 with the Hub's X-Error-Code for an unknown repository, revision or file; 401 for a gated one.

Every request is logged (method, path, Range) for the tests that count them. The server runs in a
daemon thread and shuts itself down after `lifetime` seconds if a test never stops it.
"""

from __future__ import annotations

import hashlib
import json
import re
import threading
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer


@dataclass
class Repo:
    files: dict[str, bytes]
    gated: bool = False
    private: bool = False  # answered as the Hub answers a stranger: 401, RepoNotFound
    sha: str = ""

    def __post_init__(self):
        if not self.sha:
            digest = hashlib.sha1()
            for name in sorted(self.files):
                digest.update(name.encode() + hashlib.sha1(self.files[name]).digest())
            self.sha = digest.hexdigest()


@dataclass
class Hub:
    repos: dict[str, Repo] = field(default_factory=dict)
    log: list[tuple[str, str, str | None]] = field(default_factory=list)
    url: str = ""

    def add(self, repo: str, files: dict[str, bytes], gated: bool = False) -> Repo:
        self.repos[repo] = Repo(files, gated)
        return self.repos[repo]

    def requests(self, method: str | None = None, contains: str = "") -> list[tuple[str, str, str | None]]:
        return [r for r in self.log if (method is None or r[0] == method) and contains in r[1]]


def _handler(hub: Hub):
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, *args):  # quiet
            pass

        def _send(self, code: int, body: bytes = b"", headers: dict | None = None, head: bool = False):
            self.send_response(code)
            for k, v in (headers or {}).items():
                self.send_header(k, str(v))
            self.send_header("Content-Length", str(len(body)) if not head else (headers or {}).get("X-Size", "0"))
            self.end_headers()
            if not head:
                self.wfile.write(body)

        def _error(self, code: int, error_code: str, message: str):
            body = json.dumps({"error": message}).encode()
            self._send(
                code,
                b"" if self.command == "HEAD" else body,
                {"X-Error-Code": error_code, "X-Error-Message": message, "Content-Type": "application/json"},
                head=False,
            )

        def _route(self, head: bool):
            path = self.path.split("?")[0]
            hub.log.append((self.command, path, self.headers.get("Range")))
            m = re.fullmatch(r"/api/models/([^/]+/[^/]+)(?:/revision/([^/]+))?", path)
            if m:
                return self._info(m.group(1), m.group(2))
            m = re.fullmatch(r"/([^/]+/[^/]+)/resolve/([^/]+)/(.+)", path)
            if m:
                return self._file(m.group(1), m.group(2), m.group(3), head)
            return self._error(404, "EntryNotFound", f"no route {path}")

        def _repo(self, name: str, rev: str | None) -> Repo | None:
            repo = hub.repos.get(name)
            if repo is None:
                self._error(404, "RepoNotFound", "Repository not found")
                return None
            if repo.private:
                self._error(401, "RepoNotFound", "Repository not found")
                return None
            if repo.gated:
                self._error(401, "GatedRepo", "Access to this model is restricted")
                return None
            if rev not in (None, "main", repo.sha):
                self._error(404, "RevisionNotFound", "Invalid rev id")
                return None
            return repo

        def _info(self, name: str, rev: str | None):
            repo = self._repo(name, rev)
            if repo is None:
                return
            body = {"id": name, "modelId": name, "sha": repo.sha, "private": False,
                    "siblings": [{"rfilename": f, "size": len(b)} for f, b in repo.files.items()]}  # fmt: skip
            self._send(200, json.dumps(body).encode(), {"Content-Type": "application/json"})

        def _file(self, name: str, rev: str, filename: str, head: bool):
            repo = self._repo(name, rev)
            if repo is None:
                return
            if filename not in repo.files:
                return self._error(404, "EntryNotFound", f"{filename} does not exist")
            data = repo.files[filename]
            common = {"ETag": f'"{hashlib.sha1(data).hexdigest()}"', "X-Repo-Commit": repo.sha,
                      "Accept-Ranges": "bytes", "Content-Type": "application/octet-stream"}  # fmt: skip
            rng = self.headers.get("Range")
            if rng and not head:
                m = re.fullmatch(r"bytes=(\d+)-(\d*)", rng.strip())
                start = int(m.group(1))
                end = min(int(m.group(2)) if m.group(2) else len(data) - 1, len(data) - 1)
                if start >= len(data):
                    return self._send(416, b"", {"Content-Range": f"bytes */{len(data)}"})
                part = data[start : end + 1]
                return self._send(206, part, {**common, "Content-Range": f"bytes {start}-{end}/{len(data)}"})
            if head:
                return self._send(200, b"", {**common, "X-Size": len(data)}, head=True)
            return self._send(200, data, common)

        def do_GET(self):
            self._route(head=False)

        def do_HEAD(self):
            self._route(head=True)

    return Handler


class Serving:
    """A running Hub: `hub.url` is its endpoint; `stop()` shuts it down (also after `lifetime` seconds)."""

    def __init__(self, hub: Hub, lifetime: float = 600):
        self.hub = hub
        self.server = ThreadingHTTPServer(("127.0.0.1", 0), _handler(hub))
        self.server.daemon_threads = True
        hub.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()
        self.timer = threading.Timer(lifetime, self.stop)
        self.timer.daemon = True
        self.timer.start()

    def stop(self) -> None:
        self.timer.cancel()
        self.server.shutdown()
        self.server.server_close()
