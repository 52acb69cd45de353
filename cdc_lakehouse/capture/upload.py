"""Copy a capture's landing files to object storage (`upload_to: s3://bucket/prefix`).

The local landing folder (`out`) stays the capture's durable staging: files are written there
first (sink.py: complete under their final name, offsets recovered from them), then each finished
file is uploaded under the same relative path below the prefix. A file is never changed once
written and an S3 PUT is atomic, so an object that exists is the whole file (sizes are not
compared: SeaweedFS lists a `.gz` object with its stored size, not the bytes it returns): at
start the capture uploads every local file the store lacks (a run killed between writing and
uploading loses nothing), and after each batch the files it wrote. The landing zone's readers
(the bronze models) see a file only when its upload is complete.

S3 through pyarrow's file system (`pip install pyarrow`, in requirements-dev.txt); endpoint
from `s3_endpoint` or `CDC_S3_ENDPOINT` (an S3-compatible server: `http://127.0.0.1:8333`),
none for AWS; credentials from `AWS_ACCESS_KEY_ID` / `AWS_SECRET_ACCESS_KEY` (or the AWS
credential chain), never from the capture's settings.
"""

from __future__ import annotations

import os
from collections.abc import Iterable
from pathlib import Path
from urllib.parse import urlparse


class UploadError(RuntimeError):
    """A landing file could not be copied to the object store (or the store not listed)."""


def _is_landing_file(path: Path, root: Path) -> bool:
    """Data files and snapshot manifests; not a writer's hidden temporary files."""
    parts = path.relative_to(root).parts
    return path.is_file() and not any(part.startswith(".") for part in parts)


def object_base(url: str) -> str:
    """`bucket/prefix` of an `upload_to` URL (`s3://` or `s3a://`); ValueError otherwise."""
    parsed = urlparse(url)
    if parsed.scheme not in ("s3", "s3a") or not parsed.netloc:
        raise ValueError(f"upload_to must be s3://<bucket>/<prefix>, got {url!r}")
    return f"{parsed.netloc}/{parsed.path.strip('/')}".rstrip("/")


class Uploader:
    def __init__(self, local_root: Path, url: str, endpoint: str | None = None) -> None:
        self.base = object_base(url)
        self.local_root = Path(local_root)
        self.url = url
        try:
            from pyarrow import fs
        except ImportError as e:  # pragma: no cover - depends on the installation
            raise UploadError("upload_to needs pyarrow: pip install pyarrow") from e
        endpoint = endpoint or os.environ.get("CDC_S3_ENDPOINT") or None
        options: dict[str, object] = {}
        if endpoint:
            target = urlparse(endpoint if "://" in endpoint else f"https://{endpoint}")
            options |= {
                "endpoint_override": target.netloc,
                "scheme": target.scheme,
                "region": os.environ.get("AWS_REGION", "us-east-1"),
            }
        if os.environ.get("AWS_ACCESS_KEY_ID"):
            options |= {
                "access_key": os.environ["AWS_ACCESS_KEY_ID"],
                "secret_key": os.environ.get("AWS_SECRET_ACCESS_KEY", ""),
            }
        self.fs = fs.S3FileSystem(**options)
        self._fs_module = fs
        self.uploaded = 0

    def remote_path(self, path: Path) -> str:
        return f"{self.base}/{path.relative_to(self.local_root).as_posix()}"

    def remote_files(self) -> set[str]:
        """Every object below the prefix (keys: bucket/prefix/relative path)."""
        fs = self._fs_module
        selector = fs.FileSelector(self.base, recursive=True, allow_not_found=True)
        try:
            infos = self.fs.get_file_info(selector)
        except OSError as e:
            raise UploadError(f"cannot list {self.url}: {e}") from e
        return {i.path for i in infos if i.type == fs.FileType.File}

    def upload(self, paths: Iterable[Path]) -> int:
        """Copy these local files (below the local root) to the store; returns how many."""
        count = 0
        for path in paths:
            key = self.remote_path(path)
            try:
                with self.fs.open_output_stream(key) as stream:
                    stream.write(path.read_bytes())
            except OSError as e:
                raise UploadError(f"cannot upload {path} to s3://{key}: {e}") from e
            count += 1
        self.uploaded += count
        return count

    def reconcile(self) -> int:
        """Upload every local landing file the store lacks; returns how many were uploaded."""
        if not self.local_root.is_dir():
            return 0
        remote = self.remote_files()
        missing = [
            path
            for path in sorted(self.local_root.rglob("*"))
            if _is_landing_file(path, self.local_root) and self.remote_path(path) not in remote
        ]
        return self.upload(missing)
