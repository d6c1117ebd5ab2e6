/*
 * The output toolkit's one rule for text from outside (releaser names and
 * notes, command lines of other users' processes, names from a trace log
 * that may be hostile) shown on a terminal: a terminal obeys the control
 * sequences it is sent, so none passes. Valid UTF-8 is kept except the
 * controls C0, DEL and C1 (U+009B opens an escape sequence like ESC [) and
 * the bidirectional formatting characters (below); those, and every byte
 * that is not part of valid UTF-8 (a raw 0x9b included, CSI to a terminal
 * in 8-bit mode), appear as '?'.
 *
 * Bidirectional formatting: the embeddings and overrides U+202A-202E and
 * the isolates U+2066-2069 make a terminal that applies the Unicode bidi
 * algorithm show what follows them reordered, so a name could show other
 * text than it holds ("Trojan Source", CVE-2021-42574: "abc\u202Efdp.exe"
 * shows as "abcexe.pdf"). The marks LRM, RLM (U+200E, U+200F) and ALM
 * (U+061C) are invisible too and steer the neutral characters around
 * them; no name we show needs them (right-to-left text is laid out by its
 * own letters), so they are shown as '?' as well. The JSON writer escapes
 * the same characters (\u202e), which keeps the value and the display
 * safe.
 */
#ifndef GPR_OUT_TEXT_H
#define GPR_OUT_TEXT_H

#include <stddef.h>
#include <stdint.h>

#include "buf.h"

/*
 * Length in bytes (1-4) of the valid UTF-8 sequence at s, its code point
 * in *cp (if cp is not NULL); 0 if the bytes at s are not one (a stray
 * continuation byte, an overlong form, a surrogate, beyond U+10FFFF, a
 * sequence cut short). s must be NUL-terminated; at the NUL it returns 1.
 */
size_t gpr__utf8_len(const char *s, uint32_t *cp);

/* 1 if code point cp is shown as '?' by the rule above. */
int gpr__text_unsafe(uint32_t cp);

/*
 * Appends s as the rule above shows it: at most `max` characters (max <=
 * 0: all), never cutting inside one; with `pad`, spaces up to `max`. Each
 * character counts as one column.
 */
void gpr__text_put(struct gpr__buf *b, const char *s, int max, int pad);

/* How many characters gpr__text_put shows for all of s. */
int gpr__text_len(const char *s);

/*
 * The notes of a report as text, the twin of gpr__html_notes: a blank line,
 * "notes:", then "  - <note>" a line, each by the rule above (nothing when
 * n is 0).
 */
void gpr__text_notes(struct gpr__buf *b, const char *const *notes, size_t n);

#endif /* GPR_OUT_TEXT_H */
