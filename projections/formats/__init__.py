"""The providers' request formats a prompt view renders in, by name."""

from __future__ import annotations

from projections.formats.anthropic import AnthropicMessages
from projections.formats.base import Format
from projections.formats.gemini import GeminiContents
from projections.formats.openai_chat import OpenAIChat
from projections.formats.openai_responses import OpenAIResponses

FORMATS: dict[str, Format] = {
    spec.name: spec
    for spec in (OpenAIChat(), OpenAIResponses(), AnthropicMessages(), GeminiContents())
}
