// The clock both sides of a chat-template cross-check read: once
// pinClock() has run, `new Date()` and Date.now() give the pinned time and
// Intl.DateTimeFormat formats in UTC with en-US month names unless told a
// locale, so strftime_now() in @huggingface/jinja formats the case's time.
// Shared by tests/chat/crosscheck.mjs and tests/boot/chat_reference.mjs.

// Replaces Date and Intl.DateTimeFormat; returns the setter of the pinned
// time, in milliseconds since the epoch (0 until set).
export function pinClock() {
    const RealDate = Date;
    let pinnedMs = 0;
    globalThis.Date = class extends RealDate {
        constructor(...a) {
            if (a.length === 0) super(pinnedMs);
            else super(...a);
        }
        static now() {
            return pinnedMs;
        }
    };
    const RealDTF = Intl.DateTimeFormat;
    Intl.DateTimeFormat = function (locale, options) {
        return new RealDTF(locale ?? "en-US", { ...options, timeZone: "UTC" });
    };
    return (ms) => {
        pinnedMs = ms;
    };
}

// A special token of tokenizer_config.json as text: a string, or an
// AddedToken's content.
export const tokenText = (t) => (t == null ? undefined : typeof t === "string" ? t : t.content);
