"""Starting a session and changing its settings or system prompt."""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable
from dataclasses import replace

from domain.ids import new_id
from domain.session import Session
from domain.settings import SessionSettings
from domain.system_prompt import (
    SystemPrompt,
    validate_system_prompt,
    with_files_cut,
    with_object_schemas,
)
from services.adapters.tokenizers import count_system_prompt, tokenizer_for
from services.app.history_cache import HistoryCache
from services.app.session_rules import SessionRules
from services.app.write_path import WritePath, Written


class SessionCommands:
    def __init__(self, writes: WritePath, histories: HistoryCache, rules: SessionRules) -> None:
        self.writes = writes
        self.histories = histories
        self.rules = rules

    def create_session(
        self, session_id: str, choose: Callable[[SessionSettings], SessionSettings]
    ) -> Written[None]:
        """A new session with the server's defaults, changed as ``choose`` says, in the
        stream ``session_id`` (the caller's, from SessionIds; a new id when empty)."""
        ids = self.writes.access.ids
        session_id = session_id or ids.stream(new_id())
        settings = self.rules.new_settings(choose)
        session = Session.start(
            session_id,
            settings,
            self.rules.context_window(settings),
            max_entry_bytes_limit=self.rules.max_content_bytes,
            tenant=ids.tenant_and_id(session_id)[0],
        )
        return Written(session, None, self.writes.save(session))

    def update_settings(
        self,
        session_id: str,
        change: Callable[[SessionSettings], SessionSettings],
        expected_version: int | None,
        *,
        sets_window: bool = False,
        forget_learned_limits: bool = False,
    ) -> Written[None]:
        """Records the settings ``change`` makes; ``sets_window``: the change names
        context_window_tokens (see Session.change_settings). ``forget_learned_limits``
        first has the session forget what overflow errors taught, so the change is
        checked against the window it will be served in."""

        def command(session: Session) -> None:
            settings = change(session.settings)
            self.rules.check(settings)
            if forget_learned_limits:
                session.forget_learned_limits()
            largest = 0
            if session.entry_count:
                largest = self.histories.history(session_id).prompt_view().largest_message_tokens()
            session.change_settings(
                settings,
                self.rules.context_window(settings),
                max_entry_bytes_limit=self.rules.max_content_bytes,
                largest_message_tokens=largest,
                sets_window=sets_window,
            )

        return self.writes.write(session_id, expected_version, command)

    def set_system_prompt(
        self, session_id: str, prompt: SystemPrompt, expected_version: int | None
    ) -> Written[tuple[SystemPrompt, bool]]:
        """Stores the prompt, counted with the session model's tokenizer; answers the
        prompt as stored and whether it changed."""

        def command(session: Session) -> tuple[SystemPrompt, bool]:
            validate_system_prompt(prompt)
            tokenizer = tokenizer_for(session.settings.model)
            cut = with_files_cut(
                with_object_schemas(prompt), session.settings.max_system_file_chars
            )
            counted = replace(cut, tokens=count_system_prompt(cut, tokenizer))
            fingerprint = hashlib.sha256(
                json.dumps(counted.to_dict(), sort_keys=True).encode()
            ).hexdigest()
            version = session.version
            session.set_system_prompt(counted, fingerprint)
            return counted, session.version != version

        return self.writes.write(session_id, expected_version, command)
