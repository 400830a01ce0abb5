"""The README's first "Try it" command works in a fresh clone: its file ships in the repository
(``../shared`` is only beside a developer's or CI's checkout), and a name that is the reader's
own is said to be so."""

from __future__ import annotations

from conftest import ROOT


def try_it_block() -> str:
    text = (ROOT / "README.md").read_text()
    return text.split("Try it without a microphone", 1)[1].split("```sh\n", 1)[1].split("```")[0]


def test_the_first_try_it_command_streams_a_file_of_the_repository():
    first, second = try_it_block().splitlines()[:2]
    cmd = first.split("#")[0].split()
    assert cmd[:2] == [".venv/bin/whisperwire", "stream"], first
    path = (ROOT / cmd[2]).resolve()
    assert path.is_relative_to(ROOT) and path.is_file(), first
    assert "your own file" in second, second


def test_shared_is_explained_where_the_readme_first_names_it():
    text = (ROOT / "README.md").read_text()
    at = text.index("../shared")
    assert "beside the repository" in text[at - 300 : at + 300]
