"""`make lab` serves the notebooks: start JupyterLab on a loopback port, list them, stop it."""
import json
import os
import secrets
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

from myops.build import REPO_ROOT


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_jupyterlab_serves_the_notebooks(tmp_path):
    port, token = free_port(), secrets.token_hex(16)
    lab = subprocess.Popen(
        [str(Path(sys.executable).parent / "jupyter"), "lab", "--no-browser", "--ip=127.0.0.1",
         f"--port={port}", f"--IdentityProvider.token={token}", f"--ServerApp.root_dir={REPO_ROOT / 'notebooks'}",
         *(["--allow-root"] if os.geteuid() == 0 else [])],  # as `make lab` does
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env={"HOME": str(tmp_path), "PATH": "/usr/bin:/bin"})
    try:
        url = f"http://127.0.0.1:{port}/api/contents?token={token}"
        deadline = time.monotonic() + 60
        while True:
            try:
                with urllib.request.urlopen(url, timeout=5) as response:
                    listing = json.load(response)
                break
            except OSError:
                assert lab.poll() is None, "jupyter lab exited"
                assert time.monotonic() < deadline, "jupyter lab did not answer within 60 s"
                time.sleep(0.5)
        served = {item["name"] for item in listing["content"] if item["type"] == "notebook"}
        expected = {p.name for p in (REPO_ROOT / "notebooks").glob("*.ipynb")}
        assert expected and served == expected
    finally:
        lab.terminate()
        lab.wait(timeout=30)
