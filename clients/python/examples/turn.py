"""A turn of an agent on the session store: the user's message in, the prompt view out.

`make lint` checks this file with `mypy --strict`, as a user's code would be.
"""

from __future__ import annotations

import json
from typing import Any

from sessionstore_client import Client, Entry, PromptFormat, Role, TextBlock, ViewAfterAppend
from sessionstore_client.errors import WindowTooSmall


def user_turn(client: Client, session_id: str, text: str) -> list[dict[str, Any]]:
    """Appends the user's message and answers the messages to send to the model."""
    answer = client.append_entries(
        session_id,
        entries=[Entry(role=Role.USER, content=[TextBlock(text)])],
        view_after_append=ViewAfterAppend(format=PromptFormat.OPENAI),
    )
    if answer.view_after_append is None:
        raise RuntimeError(answer.view_after_append_error)
    messages: list[dict[str, Any]] = json.loads(answer.view_after_append.messages_json)
    return messages


def main() -> None:
    with Client() as client:
        session = client.create_session()
        try:
            print(user_turn(client, session.id, "hello"))
        except WindowTooSmall as refused:
            print("window too small:", refused.metadata["window_tokens"])


if __name__ == "__main__":
    main()
