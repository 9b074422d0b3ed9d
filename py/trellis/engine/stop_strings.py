"""Stop strings over a text stream: text is released only once it cannot be the start of a stop
string, so a stream never shows part of one, and the text ends right before the first match."""


class StopStrings:
    def __init__(self, stops):
        self.stops = tuple(s for s in stops if s)
        self._held = ""
        self.stopped = False

    def push(self, text: str) -> str:
        """The text that is safe to show after adding `text` (empty once a stop string matched)."""
        if self.stopped:
            return ""
        if not self.stops:
            return text
        held = self._held + text
        hits = [i for i in (held.find(s) for s in self.stops) if i >= 0]
        if hits:
            self.stopped, self._held = True, ""
            return held[:min(hits)]
        keep = 0  # the longest tail of `held` that begins some stop string
        for s in self.stops:
            for n in range(min(len(s) - 1, len(held)), keep, -1):
                if held.endswith(s[:n]):
                    keep = n
                    break
        self._held = held[len(held) - keep:] if keep else ""
        return held[:len(held) - keep]

    def flush(self) -> str:
        """At the end of generation, the held text was not a stop string after all."""
        held, self._held = self._held, ""
        return "" if self.stopped else held
