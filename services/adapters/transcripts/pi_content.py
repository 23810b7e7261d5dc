"""A pi message's content as the store writes it, shared by the pi reader (which keeps
an entry whose content would be written back the same) and the pi writer."""

from __future__ import annotations

import json
from typing import Any

from domain.content import Entry, ImageRef, TextBlock, ThinkingBlock, ToolCall, ToolResult

# ``details.synthetic`` of the error results that stand for abandoned tool calls.
SYNTHETIC = "abandoned"


def pi_content(entry: Entry, role: str) -> Any:
    """The entry's blocks as a pi message's ``content``."""
    if role == "toolResult":
        results = entry.tool_results
        return [{"type": "text", "text": results[0].content}] if results else []
    blocks: list[dict[str, Any]] = []
    for block in entry.content:
        match block:
            case TextBlock(text=text):
                blocks.append({"type": "text", "text": text})
            case ThinkingBlock(thinking=thinking, signature=signature):
                thought: dict[str, Any] = {"type": "thinking", "thinking": thinking}
                if signature:
                    thought["thinkingSignature"] = signature
                blocks.append(thought)
            case ToolCall(id=call_id, name=name, arguments_json=arguments):
                blocks.append(
                    {
                        "type": "toolCall",
                        "id": call_id,
                        "name": name,
                        "arguments": json.loads(arguments),
                    }
                )
            case ImageRef(uri=uri, media_type=media_type):
                data = uri.split(";base64,", 1)[1] if ";base64," in uri else uri
                blocks.append({"type": "image", "data": data, "mimeType": media_type})
            case ToolResult():
                raise ValueError("a tool result in a message that is not a toolResult")
    return blocks
