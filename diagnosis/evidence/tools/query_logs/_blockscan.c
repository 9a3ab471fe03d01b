/*
 * The byte-level half of query_logs' counting scan (see logscan.py), in one pass per job:
 *
 *   block_index(buf, layouts)
 *                     -> where each line starts and ends, its first 16 quotes, its ts value
 *                        as Unix seconds and microseconds, and flags saying which lines the
 *                        fast path must leave to the line-by-line code (escapes, control
 *                        bytes, keys not where a layout puts them, a stamp that is not UTC);
 *   line_keys(buf, quotes, ends, rows)
 *                     -> the given lines' keys (from the service to the line's end, every
 *                        digit as 1, the contents of string values after the message
 *                        emptied): the distinct ones in the order they first occur, and
 *                        the lines grouped by key;
 *   plain_index(buf)  -> the same for plain-text lines that start with their timestamp:
 *                        bounds, where the text after the stamp starts, the stamp as Unix
 *                        seconds and microseconds, flags (see plain_line_index);
 *   plain_keys(buf, rest, ends, rows)
 *                     -> as line_keys, a key being the text after the stamp with every
 *                        ASCII digit as 1.
 *
 * The rules are the ones logscan.py states; it decides everything else with numpy. No
 * Python object is touched while a block is read, so the GIL is released meanwhile.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdint.h>
#include <string.h>
#ifdef __SSE2__
#include <emmintrin.h>
#endif

#define QUOTES 16

enum {
    FLAG_CONTROL = 1,       /* a byte below 32 other than the newline (plain: and the tab) */
    FLAG_BACKSLASH = 2,     /* an escape: json.loads must read the line */
    FLAG_SHORT = 4,         /* fewer than 16 quotes */
    FLAG_LATER_TS = 8,      /* a "ts" key after the message (json.loads would take it) */
    FLAG_HEX = 16,          /* "0x" inside the message (plain lines: anywhere) */
    FLAG_LEADING_ZERO = 32, /* a number after the message written with a leading zero */
    FLAG_LAYOUT = 64,       /* the four keys are not where a layout puts them */
    FLAG_STAMP = 128,       /* the ts value is not YYYY-MM-DDTHH:MM:SS[.1-9 digits]Z (plain
                               lines: no stamp in the strict form plain_stamp_read takes) */
    FLAG_ESCAPED = 256      /* the message holds JSON escapes (each one well formed) */
};

#define LAYOUTS_MAX 4
#define LAYOUT_PART_MAX 32
/* Bumped whenever a function's arguments or results change: logscan.py checks it on import,
 * so a build left from an older checkout fails loudly instead of misreading. */
#define ABI_VERSION 6

/* The four fields' keys as a layout writes them: the line's start, then what follows the
 * closing quotes of the ts, service and level values. */
typedef struct {
    int count;
    char part[LAYOUTS_MAX][4][LAYOUT_PART_MAX]; /* copied: read while the GIL is released */
    Py_ssize_t len[LAYOUTS_MAX][4];
} Layouts;

/* 1: newline, 2: other control byte, 3: quote, 4: backslash, 5: colon, 6: zero. */
static unsigned char byte_class[256];

static void byte_class_init(void) {
    for (int c = 0; c < 32; c++) byte_class[c] = 2;
    byte_class['\n'] = 1;
    byte_class['"'] = 3;
    byte_class['\\'] = 4;
    byte_class[':'] = 5;
    byte_class['0'] = 6;
}

static inline int is_digit(unsigned char c) { return c >= '0' && c <= '9'; }

#ifdef __SSE2__
/* Bit k set: byte k of ``x`` matters in the line's current part (a control byte, quote or
 * backslash anywhere, a zero inside the message, a colon after it). */
static inline unsigned bytes_that_matter(__m128i x, int zeros, int colons) {
    __m128i hit = _mm_or_si128(_mm_cmpeq_epi8(x, _mm_set1_epi8('"')),
                               _mm_cmpeq_epi8(x, _mm_set1_epi8('\\')));
    hit = _mm_or_si128(hit, _mm_cmpeq_epi8(_mm_min_epu8(x, _mm_set1_epi8(31)), x));
    if (zeros) hit = _mm_or_si128(hit, _mm_cmpeq_epi8(x, _mm_set1_epi8('0')));
    if (colons) hit = _mm_or_si128(hit, _mm_cmpeq_epi8(x, _mm_set1_epi8(':')));
    return (unsigned)_mm_movemask_epi8(hit);
}
#endif

/* A number with a leading zero right after the colon at ``at``: ":0D", ": 0D", ":-0D", ": -0D". */
static inline int leading_zero_at(const unsigned char *s, Py_ssize_t at, Py_ssize_t end) {
    Py_ssize_t i = at + 1;
    if (i < end && s[i] == ' ') i++;
    if (i < end && s[i] == '-') i++;
    return i + 1 < end && s[i] == '0' && is_digit(s[i + 1]);
}

static inline uint64_t word_at(const void *p) {
    uint64_t w;
    memcpy(&w, p, 8);
    return w;
}

/* Whether ``needle`` (1 to 32 bytes) is at ``at``, within the line that ends at ``end``. A
 * needle of 8 to 16 bytes is compared as two overlapping 8-byte words. */
static inline int bytes_at(const unsigned char *s, Py_ssize_t at, Py_ssize_t end,
                           const char *needle, Py_ssize_t len) {
    if (at + len > end) return 0;
    if (len >= 8 && len <= 16)
        return word_at(s + at) == word_at(needle) &&
               word_at(s + at + len - 8) == word_at(needle + len - 8);
    return memcmp(s + at, needle, (size_t)len) == 0;
}

/* Whether the line from ``start`` begins as some layout does and, for some layout, has its
 * service, level and message keys right after the ts, service and level values. */
static int layout_fits(const unsigned char *s, Py_ssize_t start, Py_ssize_t end,
                       const int64_t *q, const Layouts *layouts) {
    int begins = 0, keys = 0;
    for (int k = 0; k < layouts->count; k++) {
        const char(*part)[LAYOUT_PART_MAX] = layouts->part[k];
        const Py_ssize_t *len = layouts->len[k];
        begins |= bytes_at(s, start, end, part[0], len[0]);
        keys |= bytes_at(s, q[3], end, part[1], len[1]) && bytes_at(s, q[7], end, part[2], len[2]) &&
                bytes_at(s, q[11], end, part[3], len[3]);
    }
    return begins && keys;
}

/* Days from 1970-01-01 to a proleptic Gregorian date (H. Hinnant's days_from_civil). */
static int64_t days_from_civil(int64_t y, int64_t m, int64_t d) {
    y -= m <= 2;
    const int64_t era = (y >= 0 ? y : y - 399) / 400;
    const int64_t yoe = y - era * 400;
    const int64_t doy = (153 * (m + (m > 2 ? -3 : 9)) + 2) / 5 + d - 1;
    const int64_t doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    return era * 146097 + doe - 719468;
}

static int days_in_month(int64_t y, int64_t m) {
    static const int days[12] = {31, 28, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31};
    int leap = (y % 4 == 0 && y % 100 != 0) || y % 400 == 0;
    return days[m - 1] + (m == 2 && leap);
}

static inline int64_t digits_value(const unsigned char *t, int from, int count) {
    int64_t value = 0;
    for (int k = from; k < from + count; k++) value = value * 10 + (t[k] - '0');
    return value;
}

/* The date and time of the 19 bytes ``YYYY-MM-DDxHH:MM:SS`` at ``t`` (digits already checked)
 * as Unix seconds; 0 when datetime cannot hold them. */
static int civil_seconds(const unsigned char *t, int64_t *seconds) {
    int64_t year = digits_value(t, 0, 4), month = digits_value(t, 5, 2);
    int64_t day = digits_value(t, 8, 2), hour = digits_value(t, 11, 2);
    int64_t minute = digits_value(t, 14, 2), second = digits_value(t, 17, 2);
    if (year < 1 || month < 1 || month > 12 || day < 1 || day > days_in_month(year, month) ||
        hour > 23 || minute > 59 || second > 59)
        return 0;
    *seconds = days_from_civil(year, month, day) * 86400 + hour * 3600 + minute * 60 + second;
    return 1;
}

/* The ts value between quotes ``q[2]`` and ``q[3]`` as Unix seconds and microseconds (a
 * finer fraction is cut), as datetime.fromisoformat(...).timestamp() reads it; 0 when it
 * is not a UTC stamp as written here or not a moment datetime can hold. */
static const int64_t fraction_scale[6] = {100000, 10000, 1000, 100, 10, 1};

/* Whether the 19 bytes at ``t`` are YYYY-MM-DDTHH:MM:SS in ASCII digits (``space``: or with
 * a space for the T). */
static int stamp_shape(const unsigned char *t, int space) {
    static const int digit_at[14] = {0, 1, 2, 3, 5, 6, 8, 9, 11, 12, 14, 15, 17, 18};
    static const char punct[5] = {'-', '-', 'T', ':', ':'};
    static const int punct_at[5] = {4, 7, 10, 13, 16};
    for (int k = 0; k < 14; k++)
        if (!is_digit(t[digit_at[k]])) return 0;
    for (int k = 0; k < 5; k++)
        if (t[punct_at[k]] != punct[k] && !(k == 2 && space && t[10] == ' ')) return 0;
    return 1;
}

static int stamp_read(const unsigned char *s, const int64_t *q, int64_t *seconds,
                      int64_t *micros) {
    const unsigned char *t = s + q[2] + 1;
    Py_ssize_t len = q[3] - (q[2] + 1);
    if (!(len == 20 || (len >= 22 && len <= 30)) || t[len - 1] != 'Z') return 0;
    if (!stamp_shape(t, 0)) return 0;
    int64_t fraction = 0;
    if (len >= 22) {
        if (t[19] != '.') return 0;
        for (Py_ssize_t k = 20; k < len - 1; k++) {
            if (!is_digit(t[k])) return 0;
            if (k < 26) fraction += (t[k] - '0') * fraction_scale[k - 20];
        }
    }
    if (!civil_seconds(t, seconds)) return 0;
    *micros = fraction;
    return 1;
}

typedef struct {
    int64_t *starts, *ends, *quotes, *seconds, *micros;
    uint16_t *flags;
    int64_t *rest; /* plain lines (quotes unused): where the text after the stamp starts */
} Index;

typedef struct {
    int64_t *q;
    int found;          /* quotes so far (the first 16 are kept) */
    int in_string;      /* after the 16th quote: inside a string value */
    uint16_t flags;
    Py_ssize_t skip_to; /* the bytes of an escape in the message, read with its backslash */
} LineState;

static inline int is_hex(unsigned char c) {
    return is_digit(c) || (c >= 'a' && c <= 'f') || (c >= 'A' && c <= 'F');
}

/* The length of the well-formed JSON escape at ``i`` (a backslash), 0 when it is not one. */
static inline Py_ssize_t escape_length(const unsigned char *s, Py_ssize_t i, Py_ssize_t size) {
    if (i + 1 >= size) return 0;
    switch (s[i + 1]) {
    case '"': case '\\': case '/': case 'b': case 'f': case 'n': case 'r': case 't':
        return 2;
    case 'u':
        if (i + 5 < size && is_hex(s[i + 2]) && is_hex(s[i + 3]) && is_hex(s[i + 4]) &&
            is_hex(s[i + 5]))
            return 6;
    }
    return 0;
}

/* The byte at ``i``; returns 1 at the newline. */
static inline __attribute__((always_inline)) int byte_take(const unsigned char *s, Py_ssize_t i,
                                                           Py_ssize_t size, LineState *st) {
    if (i < st->skip_to) return 0; /* inside an escape: never a newline, quote or control */
    switch (byte_class[s[i]]) {
    case 1:
        return 1;
    case 2:
        st->flags |= FLAG_CONTROL;
        break;
    case 3:
        if (st->found < QUOTES) {
            st->q[st->found++] = i;
        } else {
            st->in_string = !st->in_string;
            if (i + 3 < size && s[i + 1] == 't' && s[i + 2] == 's' && s[i + 3] == '"')
                st->flags |= FLAG_LATER_TS;
        }
        break;
    case 4: {
        /* inside the message a well-formed escape is read here; anywhere else json.loads reads */
        Py_ssize_t length = st->found == QUOTES - 1 ? escape_length(s, i, size) : 0;
        if (length) {
            st->flags |= FLAG_ESCAPED;
            st->skip_to = i + length;
        } else {
            st->flags |= FLAG_BACKSLASH;
        }
        break;
    }
    case 5: /* a colon after the message */
        if (st->found == QUOTES && !st->in_string && leading_zero_at(s, i, size))
            st->flags |= FLAG_LEADING_ZERO;
        break;
    case 6: /* a zero inside the message */
        if (st->found == QUOTES - 1 && i + 1 < size && s[i + 1] == 'x') st->flags |= FLAG_HEX;
        break;
    }
    return 0;
}

/* The offset of the newline that ends the line from ``start`` (read into ``st``). */
static Py_ssize_t line_read(const unsigned char *s, Py_ssize_t start, Py_ssize_t size,
                            LineState *st) {
    Py_ssize_t i = start;
#ifdef __SSE2__
    for (; i + 16 <= size; i += 16) {
        __m128i x = _mm_loadu_si128((const __m128i *)(s + i));
        unsigned bits = bytes_that_matter(x, st->found == QUOTES - 1, st->found == QUOTES);
        while (bits) {
            int k = __builtin_ctz(bits);
            int before = st->found;
            if (byte_take(s, i + k, size, st)) return i + k;
            if (st->found != before && st->found >= QUOTES - 1) /* into the message or past it */
                bits = bytes_that_matter(x, st->found == QUOTES - 1, st->found == QUOTES) &
                       ~((2u << k) - 1);
            else
                bits &= bits - 1;
        }
    }
#endif
    for (; i < size; i++)
        if (byte_take(s, i, size, st)) return i;
    return size;
}

/* Line ``n``, from ``start``; returns the offset of its newline. */
static Py_ssize_t line_index(const unsigned char *s, Py_ssize_t start, Py_ssize_t size,
                             const Layouts *layouts, Index *ix, Py_ssize_t n) {
    LineState st = {ix->quotes + n * QUOTES, 0, 0, 0, 0};
    Py_ssize_t end = line_read(s, start, size, &st);
    int64_t *q = st.q;
    uint16_t f = st.flags;
    ix->seconds[n] = ix->micros[n] = 0;
    if (st.found < QUOTES) {
        f |= FLAG_SHORT | FLAG_LAYOUT | FLAG_STAMP;
        for (int k = st.found; k < QUOTES; k++) q[k] = end; /* in bounds for the array code */
    } else {
        if (!layout_fits(s, start, end, q, layouts)) f |= FLAG_LAYOUT;
        if (!stamp_read(s, q, &ix->seconds[n], &ix->micros[n])) f |= FLAG_STAMP;
    }
    ix->flags[n] = f;
    ix->starts[n] = start;
    ix->ends[n] = end;
    return end;
}

static PyObject *bytes_sized(Py_ssize_t size, char **data) {
    PyObject *out = PyBytes_FromStringAndSize(NULL, size);
    if (out != NULL) *data = PyBytes_AS_STRING(out);
    return out;
}

static int layouts_parse(PyObject *seq, Layouts *layouts) {
    PyObject *items = PySequence_Fast(seq, "layouts must be a sequence");
    if (items == NULL) return -1;
    Py_ssize_t count = PySequence_Fast_GET_SIZE(items);
    int ok = count > 0 && count <= LAYOUTS_MAX;
    layouts->count = (int)count;
    for (Py_ssize_t k = 0; ok && k < count; k++) {
        PyObject *layout = PySequence_Fast_GET_ITEM(items, k);
        ok = PyTuple_Check(layout) && PyTuple_GET_SIZE(layout) == 4;
        for (int p = 0; ok && p < 4; p++) {
            PyObject *part = PyTuple_GET_ITEM(layout, p);
            Py_ssize_t len = PyBytes_Check(part) ? PyBytes_GET_SIZE(part) : 0;
            ok = len > 0 && len <= LAYOUT_PART_MAX;
            if (ok) {
                memcpy(layouts->part[k][p], PyBytes_AS_STRING(part), (size_t)len);
                layouts->len[k][p] = len;
            }
        }
    }
    Py_DECREF(items);
    if (!ok) PyErr_SetString(PyExc_ValueError, "layouts: 1 to 4 tuples of 4 bytes of 1 to 32");
    return ok ? 0 : -1;
}

/* --- plain lines ------------------------------------------------------------------------ */

/* The two ASCII digits at ``i`` as a number; -1 when the regex's \d fails there, -2 when it
 * meets a byte beyond ASCII first (which might be a digit of another script). */
static int digit_pair(const unsigned char *s, Py_ssize_t i, Py_ssize_t end) {
    for (Py_ssize_t k = i; k < i + 2; k++) {
        if (k >= end || (s[k] < 0x80 && !is_digit(s[k]))) return -1;
        if (s[k] >= 0x80) return -2;
    }
    return (s[i] - '0') * 10 + (s[i + 1] - '0');
}

/* The zone at ``at`` as ``[Zz]|[+-]\d{2}:?\d{2}`` takes it: its length (0: none) and its
 * offset east in seconds; -1 when unsure (a lower-case z, which fromisoformat refuses, a
 * byte beyond ASCII where a digit is tested, an offset past 23:59). */
static Py_ssize_t zone_read(const unsigned char *s, Py_ssize_t at, Py_ssize_t end,
                            int64_t *offset) {
    if (at >= end) return 0;
    unsigned char sign = s[at];
    if (sign == 'Z') return 1;
    if (sign == 'z') return -1;
    if (sign != '+' && sign != '-') return 0;
    int hours = digit_pair(s, at + 1, end);
    if (hours < 0) return hours == -2 ? -1 : 0;
    Py_ssize_t minutes_at = at + 3 < end && s[at + 3] == ':' ? at + 4 : at + 3;
    int minutes = digit_pair(s, minutes_at, end);
    if (minutes < 0) return minutes == -2 ? -1 : 0;
    if (hours > 23 || minutes > 59) return -1;
    *offset = (sign == '-' ? -1 : 1) * (hours * 3600 + minutes * 60);
    return minutes_at + 2 - at;
}

/* A plain line's stamp from ``at`` as _PLAIN_TS (formats.py) matches it and log_time_parse
 * reads it: an optional "[", YYYY-MM-DD[T ]HH:MM:SS, an optional "." or "," and digits (cut at
 * microseconds), an optional zone (zone_read), an optional "]", then spaces and tabs;
 * ``*rest`` is where the text after them starts. 0 for whatever that regex or datetime
 * might read otherwise: no such stamp, a byte beyond ASCII where the
 * regex tests for a digit or a space (\d and \s take other scripts' ones), a moment
 * datetime cannot hold. */
static int plain_stamp_read(const unsigned char *s, Py_ssize_t at, Py_ssize_t end,
                            int64_t *seconds, int64_t *micros, int64_t *rest) {
    if (at < end && s[at] == '[') at++;
    if (end - at < 19 || !stamp_shape(s + at, 1)) return 0;
    const unsigned char *t = s + at;
    at += 19;
    int64_t fraction = 0, offset = 0;
    /* A comma fraction (Python's logging, log4j) reads as a dot one: log_time_parse gives
     * both the same moment (datetime.fromisoformat takes either). */
    int point = at < end && (s[at] == '.' || s[at] == ',');
    if (point && at + 1 < end && s[at + 1] >= 0x80) return 0;
    if (point && at + 1 < end && is_digit(s[at + 1])) {
        int k = 0;
        for (at++; at < end && is_digit(s[at]); at++, k++)
            if (k < 6) fraction += (s[at] - '0') * fraction_scale[k];
        if (at < end && s[at] >= 0x80) return 0;
    }
    Py_ssize_t zone = zone_read(s, at, end, &offset);
    if (zone < 0) return 0;
    at += zone;
    if (at < end && s[at] == ']') at++;
    while (at < end && (s[at] == ' ' || s[at] == '\t')) at++;
    if (at < end && s[at] >= 0x80) return 0;
    if (!civil_seconds(t, seconds)) return 0;
    *seconds -= offset;
    *micros = fraction;
    *rest = at;
    return 1;
}

/* FLAG_CONTROL for a byte below 32 other than the tab, FLAG_HEX for "0x", in ``from``-``end``. */
static uint16_t plain_bytes_flags(const unsigned char *s, Py_ssize_t from, Py_ssize_t end) {
    uint16_t f = 0;
    Py_ssize_t i = from;
#ifdef __SSE2__
    const __m128i low = _mm_set1_epi8(31), tab = _mm_set1_epi8('\t'), ex = _mm_set1_epi8('x');
    for (; i + 16 <= end; i += 16) {
        __m128i x = _mm_loadu_si128((const __m128i *)(s + i));
        __m128i control = _mm_andnot_si128(_mm_cmpeq_epi8(x, tab),
                                           _mm_cmpeq_epi8(_mm_min_epu8(x, low), x));
        if (_mm_movemask_epi8(control)) f |= FLAG_CONTROL;
        for (unsigned xs = (unsigned)_mm_movemask_epi8(_mm_cmpeq_epi8(x, ex)); xs; xs &= xs - 1) {
            Py_ssize_t k = i + __builtin_ctz(xs);
            if (k > from && s[k - 1] == '0') f |= FLAG_HEX;
        }
    }
#endif
    for (; i < end; i++) {
        if (s[i] < 32 && s[i] != '\t') f |= FLAG_CONTROL;
        if (s[i] == 'x' && i > from && s[i - 1] == '0') f |= FLAG_HEX;
    }
    return f;
}

/* Plain line ``n``, from ``start``; returns the offset of its newline. */
static Py_ssize_t plain_line_index(const unsigned char *s, Py_ssize_t start, Py_ssize_t size,
                                   Index *ix, Py_ssize_t n) {
    const unsigned char *nl = memchr(s + start, '\n', (size_t)(size - start));
    Py_ssize_t end = nl == NULL ? size : nl - s;
    uint16_t f = plain_bytes_flags(s, start, end);
    ix->seconds[n] = ix->micros[n] = 0;
    ix->rest[n] = end;
    if (!plain_stamp_read(s, start, end, &ix->seconds[n], &ix->micros[n], &ix->rest[n]))
        f |= FLAG_STAMP;
    ix->flags[n] = f;
    ix->starts[n] = start;
    ix->ends[n] = end;
    return end;
}

/* The six per-line arrays of a block of ``lines`` lines (the third ``third`` bytes a line). */
static int index_new(Py_ssize_t lines, Py_ssize_t third, PyObject **out, Index *ix) {
    char *p[6] = {NULL};
    const Py_ssize_t widths[6] = {8, 8, third, 8, 8, 2};
    int failed = 0;
    for (int k = 0; k < 6; k++) {
        out[k] = bytes_sized(lines * widths[k], &p[k]);
        failed |= out[k] == NULL;
    }
    if (failed) {
        for (int k = 0; k < 6; k++) Py_XDECREF(out[k]);
        return -1;
    }
    *ix = (Index){(int64_t *)p[0], (int64_t *)p[1], (int64_t *)p[2], (int64_t *)p[3],
                  (int64_t *)p[4], (uint16_t *)p[5], (int64_t *)p[2]};
    return 0;
}

static Py_ssize_t lines_count(const unsigned char *s, Py_ssize_t size) {
    Py_ssize_t lines = 0;
    for (const unsigned char *at = s, *stop = s + size;
         (at = memchr(at, '\n', (size_t)(stop - at))) != NULL; at++)
        lines++;
    return lines;
}

/* block_index (layouts given) or plain_index (layouts NULL) of one block. */
static PyObject *index_call(Py_buffer *view, const Layouts *layouts) {
    const unsigned char *s = view->buf;
    Py_ssize_t size = view->len, lines = lines_count(s, size);
    PyObject *out[6] = {NULL};
    Index ix;
    if (index_new(lines, layouts ? 8 * QUOTES : 8, out, &ix) < 0) {
        PyBuffer_Release(view);
        return NULL;
    }
    Py_BEGIN_ALLOW_THREADS
    Py_ssize_t start = 0;
    for (Py_ssize_t n = 0; n < lines; n++)
        start = (layouts ? line_index(s, start, size, layouts, &ix, n)
                         : plain_line_index(s, start, size, &ix, n)) + 1;
    Py_END_ALLOW_THREADS
    PyBuffer_Release(view);
    return Py_BuildValue("(NNNNNN)", out[0], out[1], out[2], out[3], out[4], out[5]);
}

static PyObject *block_index(PyObject *Py_UNUSED(self), PyObject *args) {
    Py_buffer view;
    PyObject *layouts_o;
    Layouts layouts;
    if (!PyArg_ParseTuple(args, "y*O", &view, &layouts_o)) return NULL;
    if (layouts_parse(layouts_o, &layouts) < 0) {
        PyBuffer_Release(&view);
        return NULL;
    }
    return index_call(&view, &layouts);
}

static PyObject *plain_index(PyObject *Py_UNUSED(self), PyObject *args) {
    Py_buffer view;
    if (!PyArg_ParseTuple(args, "y*", &view)) return NULL;
    return index_call(&view, NULL);
}

/* --- line keys ------------------------------------------------------------------------- */

typedef struct {
    uint64_t hash;
    Py_ssize_t at, len; /* the key's bytes in the keys buffer */
    int32_t id;         /* -1: empty slot */
} Slot;

typedef struct {
    Slot *slots;
    Py_ssize_t mask, used;
    unsigned char *bytes;
    Py_ssize_t bytes_len, bytes_cap;
    Py_ssize_t *key_at, *key_len; /* by id */
} Table;

static uint64_t key_hash(const unsigned char *s, Py_ssize_t len) {
    uint64_t h = 0x9E3779B97F4A7C15ull ^ (uint64_t)len;
    Py_ssize_t i = 0;
    for (; i + 8 <= len; i += 8) {
        uint64_t w;
        memcpy(&w, s + i, 8);
        h = (h ^ w) * 0xFF51AFD7ED558CCDull;
        h ^= h >> 32;
    }
    uint64_t w = 0;
    memcpy(&w, s + i, (size_t)(len - i));
    h = (h ^ w) * 0xC4CEB9FE1A85EC53ull;
    return h ^ (h >> 29);
}

static int table_grow(Table *t) {
    Py_ssize_t cap = (t->mask + 1) * 2;
    Slot *slots = PyMem_RawMalloc(sizeof(Slot) * cap);
    Py_ssize_t *at = PyMem_RawRealloc(t->key_at, sizeof(Py_ssize_t) * cap);
    if (at != NULL) t->key_at = at;
    Py_ssize_t *len = PyMem_RawRealloc(t->key_len, sizeof(Py_ssize_t) * cap);
    if (len != NULL) t->key_len = len;
    if (slots == NULL || at == NULL || len == NULL) {
        PyMem_RawFree(slots);
        return -1;
    }
    for (Py_ssize_t k = 0; k < cap; k++) slots[k].id = -1;
    for (Py_ssize_t k = 0; k <= t->mask; k++) {
        Slot old = t->slots[k];
        if (old.id < 0) continue;
        Py_ssize_t j = (Py_ssize_t)(old.hash & (uint64_t)(cap - 1));
        while (slots[j].id >= 0) j = (j + 1) & (cap - 1);
        slots[j] = old;
    }
    PyMem_RawFree(t->slots);
    t->slots = slots;
    t->mask = cap - 1;
    return 0;
}

/* The id of the key just written at the end of the keys buffer (kept if new). */
static int32_t table_intern(Table *t, Py_ssize_t at, Py_ssize_t len) {
    const unsigned char *key = t->bytes + at;
    uint64_t h = key_hash(key, len);
    Py_ssize_t j = (Py_ssize_t)(h & (uint64_t)t->mask);
    for (;; j = (j + 1) & t->mask) {
        Slot *slot = &t->slots[j];
        if (slot->id < 0) break;
        if (slot->hash == h && slot->len == len && memcmp(t->bytes + slot->at, key, len) == 0) {
            t->bytes_len = at; /* already known: drop the copy */
            return slot->id;
        }
    }
    if ((t->used + 1) * 2 > t->mask + 1) {
        if (table_grow(t) < 0) return -2;
        return table_intern(t, at, len);
    }
    int32_t id = (int32_t)t->used++;
    t->slots[j] = (Slot){h, at, len, id};
    t->key_at[id] = at;
    t->key_len[id] = len;
    return id;
}

static int bytes_reserve(Table *t, Py_ssize_t more) {
    if (t->bytes_len + more <= t->bytes_cap) return 0;
    Py_ssize_t cap = (t->bytes_len + more) * 2;
    unsigned char *bytes = PyMem_RawRealloc(t->bytes, cap);
    if (bytes == NULL) return -1;
    t->bytes = bytes;
    t->bytes_cap = cap;
    return 0;
}

/* Bytes ``from``-``to`` of ``s`` into ``out`` with every ASCII digit as 1; returns the count. */
static inline Py_ssize_t digits_as_one(unsigned char *out, const unsigned char *s, Py_ssize_t from,
                                       Py_ssize_t to) {
    Py_ssize_t n = 0, i = from;
#ifdef __SSE2__
    const __m128i zero = _mm_set1_epi8('0'), nine = _mm_set1_epi8(9), one = _mm_set1_epi8('1');
    for (; i + 16 <= to; i += 16, n += 16) {
        __m128i x = _mm_loadu_si128((const __m128i *)(s + i));
        __m128i t = _mm_sub_epi8(x, zero);
        __m128i digit = _mm_cmpeq_epi8(_mm_min_epu8(t, nine), t);
        _mm_storeu_si128((__m128i *)(out + n),
                         _mm_or_si128(_mm_and_si128(digit, one), _mm_andnot_si128(digit, x)));
    }
#endif
    for (; i < to; i++) out[n++] = is_digit(s[i]) ? '1' : s[i];
    return n;
}

/* Whether the quotes in ``from``-``to`` pair up (only then are values emptied). */
static inline int quotes_pair_up(const unsigned char *s, Py_ssize_t from, Py_ssize_t to) {
    int count = 0;
    for (const unsigned char *at = s + from, *stop = s + to;
         at < stop && (at = memchr(at, '"', (size_t)(stop - at))) != NULL; at++)
        count++;
    return count % 2 == 0;
}

/* Bytes ``from``-``to`` as ``digits_as_one`` writes them, JSON escapes copied as they are
 * (the hex digits of a u-escape are no digits of the message). */
static Py_ssize_t escaped_as_one(unsigned char *out, const unsigned char *s, Py_ssize_t from,
                                 Py_ssize_t to) {
    Py_ssize_t n = 0;
    for (Py_ssize_t i = from; i < to;) {
        const unsigned char *at = memchr(s + i, '\\', (size_t)(to - i));
        Py_ssize_t escape = at == NULL ? to : at - s;
        n += digits_as_one(out + n, s, i, escape);
        if (escape == to) break;
        Py_ssize_t length = escape_length(s, escape, to);
        if (!length) length = 1;
        memcpy(out + n, s + escape, (size_t)length);
        n += length;
        i = escape + length;
    }
    return n;
}

/* Writes one line's key at the end of the keys buffer; returns its length. The fields after
 * the message (short, as a rule) are read byte by byte. */
static Py_ssize_t key_write(Table *t, const unsigned char *s, Py_ssize_t from,
                            Py_ssize_t message_end, Py_ssize_t line_end) {
    unsigned char *out = t->bytes + t->bytes_len;
    Py_ssize_t n = escaped_as_one(out, s, from, message_end + 1);
    int empty_values = quotes_pair_up(s, message_end + 1, line_end);
    int opening = 1, in_value = 0;
    for (Py_ssize_t i = message_end + 1; i < line_end; i++) {
        unsigned char c = s[i];
        if (c != '"') {
            if (!in_value) out[n++] = is_digit(c) ? '1' : c;
            continue;
        }
        out[n++] = '"';
        if (in_value) { /* the closing quote of a value string */
            in_value = 0;
            continue;
        }
        /* a value string: keep its quotes, not what is between them */
        if (opening && empty_values && (s[i - 1] == ':' || (s[i - 1] == ' ' && s[i - 2] == ':'))) {
            in_value = 1;
            const unsigned char *close = memchr(s + i + 1, '"', (size_t)(line_end - i - 1));
            if (close != NULL) i = close - s - 1; /* next: the closing quote */
        } else {
            opening = !opening;
        }
    }
    return n;
}

static PyObject *keys_list(Table *t) {
    PyObject *keys = PyList_New(t->used);
    if (keys == NULL) return NULL;
    for (Py_ssize_t k = 0; k < t->used; k++) {
        PyObject *key = PyBytes_FromStringAndSize((const char *)t->bytes + t->key_at[k],
                                                  t->key_len[k]);
        if (key == NULL) {
            Py_DECREF(keys);
            return NULL;
        }
        PyList_SET_ITEM(keys, k, key);
    }
    return keys;
}

static int int64_view(PyObject *obj, Py_buffer *view) {
    if (PyObject_GetBuffer(obj, view, PyBUF_C_CONTIGUOUS | PyBUF_FORMAT) < 0) return -1;
    const char *format = view->format ? view->format : "B";
    if (*format == '<' || *format == '=' || *format == '@') format++;
    if (view->itemsize != 8 || (strcmp(format, "q") != 0 && strcmp(format, "l") != 0)) {
        PyBuffer_Release(view);
        PyErr_SetString(PyExc_ValueError, "offset arrays must be int64");
        return -1;
    }
    return 0;
}

/* Row positions grouped by key number (in row order within a group), and each group's size. */
static PyObject *groups_order(const int32_t *ids, Py_ssize_t rows, Py_ssize_t keys,
                              PyObject **sizes_out) {
    char *order_p = NULL, *sizes_p = NULL;
    PyObject *order = bytes_sized(rows * 8, &order_p);
    PyObject *sizes = bytes_sized(keys * 8, &sizes_p);
    Py_ssize_t *next = PyMem_RawCalloc(keys ? keys : 1, sizeof(Py_ssize_t));
    if (order == NULL || sizes == NULL || next == NULL) {
        Py_XDECREF(order), Py_XDECREF(sizes), PyMem_RawFree(next);
        return PyErr_Occurred() ? NULL : PyErr_NoMemory();
    }
    int64_t *size = (int64_t *)sizes_p, *out = (int64_t *)order_p;
    memset(size, 0, (size_t)keys * 8);
    for (Py_ssize_t r = 0; r < rows; r++) size[ids[r]]++;
    for (Py_ssize_t k = 1; k < keys; k++) next[k] = next[k - 1] + size[k - 1];
    for (Py_ssize_t r = 0; r < rows; r++) out[next[ids[r]]++] = r;
    PyMem_RawFree(next);
    *sizes_out = sizes;
    return order;
}

/* Each row's key number, written into ``out``; 0 when done, -1 on bad offsets, -2 when out
 * of memory. ``plain``: ``starts`` holds where each line's key starts (plain_index's rest),
 * else its 16 quotes. */
static int keys_number(Table *t, const unsigned char *s, Py_ssize_t size, const int64_t *starts,
                       int plain, Py_ssize_t lines, const int64_t *ends, const int64_t *rows,
                       Py_ssize_t count, int32_t *out) {
    for (Py_ssize_t r = 0; r < count; r++) {
        int64_t row = rows[r];
        if (row < 0 || row >= lines) return -1;
        Py_ssize_t from = plain ? starts[row] : starts[row * QUOTES + 6] + 1;
        Py_ssize_t message_end = plain ? from : starts[row * QUOTES + 15];
        Py_ssize_t line_end = ends[row];
        if (from < (plain ? 0 : 1) || message_end < from || line_end < message_end + !plain ||
            line_end > size)
            return -1;
        if (bytes_reserve(t, line_end - from + 1) < 0) return -2;
        Py_ssize_t at = t->bytes_len;
        t->bytes_len += plain ? digits_as_one(t->bytes + at, s, from, line_end)
                              : key_write(t, s, from, message_end, line_end);
        int32_t id = table_intern(t, at, t->bytes_len - at);
        if (id < 0) return -2;
        out[r] = id;
    }
    return 0;
}

/* line_keys (``plain`` 0: the second argument holds 16 quotes a line) or plain_keys (1: where
 * each line's key starts). */
static PyObject *keys_call(PyObject *args, int plain) {
    Py_buffer view, quotes_v, ends_v, rows_v;
    PyObject *quotes_o, *ends_o, *rows_o, *result = NULL;
    if (!PyArg_ParseTuple(args, "y*OOO", &view, &quotes_o, &ends_o, &rows_o)) return NULL;
    if (int64_view(quotes_o, &quotes_v) < 0) goto release_view;
    if (int64_view(ends_o, &ends_v) < 0) goto release_quotes;
    if (int64_view(rows_o, &rows_v) < 0) goto release_ends;
    Py_ssize_t lines = ends_v.len / 8, count = rows_v.len / 8;
    if (quotes_v.len != lines * 8 * (plain ? 1 : QUOTES)) {
        PyErr_SetString(PyExc_ValueError, plain ? "one start a line" : "16 quotes a line");
        goto release_rows;
    }
    char *ids_p = NULL;
    PyObject *ids = bytes_sized(count * 4, &ids_p);
    Table t = {0};
    t.mask = 63;
    t.slots = PyMem_RawMalloc(sizeof(Slot) * 64);
    t.key_at = PyMem_RawMalloc(sizeof(Py_ssize_t) * 64);
    t.key_len = PyMem_RawMalloc(sizeof(Py_ssize_t) * 64);
    int failed = ids == NULL || !t.slots || !t.key_at || !t.key_len ? -2 : 0;
    if (!failed) {
        for (int k = 0; k < 64; k++) t.slots[k].id = -1;
        Py_BEGIN_ALLOW_THREADS
        failed = keys_number(&t, view.buf, view.len, quotes_v.buf, plain, lines, ends_v.buf,
                             rows_v.buf, count, (int32_t *)ids_p);
        Py_END_ALLOW_THREADS
    }
    if (failed == -2 && !PyErr_Occurred()) PyErr_NoMemory();
    PyObject *keys = failed ? NULL : keys_list(&t), *sizes = NULL;
    PyObject *order = keys ? groups_order((int32_t *)ids_p, count, t.used, &sizes) : NULL;
    Py_XDECREF(ids);
    if (order != NULL) {
        result = Py_BuildValue("(NNN)", keys, order, sizes);
    } else {
        Py_XDECREF(keys);
        if (!PyErr_Occurred()) PyErr_SetString(PyExc_ValueError, "line offsets out of range");
    }
    PyMem_RawFree(t.slots), PyMem_RawFree(t.key_at), PyMem_RawFree(t.key_len);
    PyMem_RawFree(t.bytes);
release_rows:
    PyBuffer_Release(&rows_v);
release_ends:
    PyBuffer_Release(&ends_v);
release_quotes:
    PyBuffer_Release(&quotes_v);
release_view:
    PyBuffer_Release(&view);
    return result;
}

static PyObject *line_keys(PyObject *Py_UNUSED(self), PyObject *args) {
    return keys_call(args, 0);
}

static PyObject *plain_keys(PyObject *Py_UNUSED(self), PyObject *args) {
    return keys_call(args, 1);
}

static PyMethodDef methods[] = {
    {"block_index", block_index, METH_VARARGS,
     "block_index(buf, layouts) -> (starts, ends, quotes, seconds, micros, flags): per line "
     "of a block of whole lines, int64 (quotes: 16 of them) and uint16 flags."},
    {"line_keys", line_keys, METH_VARARGS,
     "line_keys(buf, quotes, ends, rows) -> (keys, order, sizes): the given rows' distinct "
     "keys in the order they first occur, the rows' positions grouped by key (int64) and "
     "each key's count of rows (int64)."},
    {"plain_index", plain_index, METH_VARARGS,
     "plain_index(buf) -> (starts, ends, rest, seconds, micros, flags): per plain-text line of "
     "a block of whole lines, int64 (rest: where the text after the stamp starts) and uint16 "
     "flags (FLAG_CONTROL, FLAG_HEX, FLAG_STAMP)."},
    {"plain_keys", plain_keys, METH_VARARGS,
     "plain_keys(buf, rest, ends, rows) -> (keys, order, sizes): as line_keys, a key being "
     "the text after the stamp with every ASCII digit as 1."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {
    PyModuleDef_HEAD_INIT, "_blockscan",
    "The byte-level half of query_logs' counting scan (see logscan.py).", -1, methods,
    NULL, NULL, NULL, NULL,
};

PyMODINIT_FUNC PyInit__blockscan(void) {
    byte_class_init();
    PyObject *m = PyModule_Create(&module);
    if (m == NULL) return NULL;
    if (PyModule_AddIntConstant(m, "ABI_VERSION", ABI_VERSION) < 0 ||
        PyModule_AddIntConstant(m, "FLAG_CONTROL", FLAG_CONTROL) < 0 ||
        PyModule_AddIntConstant(m, "FLAG_BACKSLASH", FLAG_BACKSLASH) < 0 ||
        PyModule_AddIntConstant(m, "FLAG_SHORT", FLAG_SHORT) < 0 ||
        PyModule_AddIntConstant(m, "FLAG_LATER_TS", FLAG_LATER_TS) < 0 ||
        PyModule_AddIntConstant(m, "FLAG_HEX", FLAG_HEX) < 0 ||
        PyModule_AddIntConstant(m, "FLAG_LEADING_ZERO", FLAG_LEADING_ZERO) < 0 ||
        PyModule_AddIntConstant(m, "FLAG_LAYOUT", FLAG_LAYOUT) < 0 ||
        PyModule_AddIntConstant(m, "FLAG_STAMP", FLAG_STAMP) < 0 ||
        PyModule_AddIntConstant(m, "FLAG_ESCAPED", FLAG_ESCAPED) < 0) {
        Py_DECREF(m);
        return NULL;
    }
    return m;
}
