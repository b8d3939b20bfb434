/* Compiled inner loops of parsers whose Python loop is most of a cold campaign load.
 *
 * Each function here does exactly what a loop in a parser module does, on ASCII text only
 * (the caller keeps the Python loop for anything else and as the reference); the tests
 * compare the two on real and damaged tool output. Built by `pip install -e .` (setup.py);
 * without it the parsers run their Python loops.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdint.h>
#include <string.h>

/* What str.split() splits an ASCII line at (a line holds no "\n"). */
static const unsigned char SPACE[256] = {
    ['\t'] = 1, ['\x0b'] = 1, ['\x0c'] = 1, ['\r'] = 1, [0x1c] = 1, [0x1d] = 1, [0x1e] = 1,
    [0x1f] = 1, [' '] = 1,
};
#define is_space(c) (SPACE[(c)])

/* Exact powers of ten: a double holds each one exactly. */
static const double POW10[] = {1e0, 1e1, 1e2, 1e3, 1e4, 1e5, 1e6, 1e7, 1e8, 1e9, 1e10, 1e11,
                               1e12, 1e13, 1e14, 1e15};

/* [-]digits[.digits] with at most 15 digits: the value float() gives, found as n / 10^k.
 * Both are exact doubles and IEEE division rounds correctly, so this is the correctly
 * rounded value of the decimal, which is what float() returns. 0 when not of that form. */
static int fast_decimal(const char *token, Py_ssize_t len, double *value) {
    Py_ssize_t i = token[0] == '-', digits = 0, decimals = -1;
    long long n = 0;
    if (i >= len)
        return 0;
    for (; i < len; i++) {
        char c = token[i];
        if (c == '.' && decimals < 0) {
            decimals = 0;
            continue;
        }
        if (c < '0' || c > '9' || ++digits > 15)
            return 0;
        n = n * 10 + (c - '0');
        if (decimals >= 0)
            decimals++;
    }
    if (digits == 0)
        return 0;
    double magnitude = decimals > 0 ? (double)n / POW10[decimals] : (double)n;
    *value = token[0] == '-' ? -magnitude : magnitude;
    return 1;
}

/* float(token) as Python reads it; 0 with *ok = 0 where float() raises ValueError. */
static double to_float(const char *token, Py_ssize_t len, int *ok) {
    char buffer[64];
    double quick;
    if (fast_decimal(token, len, &quick)) {
        *ok = 1;
        return quick;
    }
    int plain = len > 0 && len < (Py_ssize_t)sizeof buffer;
    for (Py_ssize_t i = 0; plain && i < len; i++) {
        char c = token[i];
        plain = (c >= '0' && c <= '9') || c == '.' || c == '-' || c == '+' || c == 'e' ||
                c == 'E';
    }
    double value;
    if (plain) {  /* Python's own parser, on a NUL-terminated copy */
        memcpy(buffer, token, (size_t)len);
        buffer[len] = '\0';
        value = PyOS_string_to_double(buffer, NULL, NULL);
    } else {  /* "nan", "inf", underscores, odd bytes: float() itself decides */
        PyObject *text = PyUnicode_DecodeASCII(token, len, NULL);
        PyObject *number = text ? PyFloat_FromString(text) : NULL;
        Py_XDECREF(text);
        value = number ? PyFloat_AS_DOUBLE(number) : -1.0;
        Py_XDECREF(number);
    }
    *ok = !(value == -1.0 && PyErr_Occurred());
    if (!*ok)
        PyErr_Clear();
    return value;
}

/* Where the tokens of line [begin, end) start and end: at most `max` of them; returns how
 * many the line has (counting beyond `max`). */
static Py_ssize_t tokens_of(const char *text, Py_ssize_t begin, Py_ssize_t end,
                            Py_ssize_t *starts, Py_ssize_t *stops, Py_ssize_t max) {
    Py_ssize_t count = 0, i = begin;
    while (i < end) {
        while (i < end && is_space((unsigned char)text[i]))
            i++;
        if (i >= end)
            break;
        Py_ssize_t start = i;
        while (i < end && !is_space((unsigned char)text[i]))
            i++;
        if (count < max) {
            starts[count] = start;
            stops[count] = i;
        }
        count++;
    }
    return count;
}

/* Add `share` to per_interval[stamp] (0.0 first) or append it to per_thread[tid]. */
static int add_share(PyObject *per_interval, PyObject *per_thread, const char *text,
                     Py_ssize_t *starts, Py_ssize_t *stops, Py_ssize_t tid_i, double share) {
    int process = stops[tid_i] - starts[tid_i] == 1 && text[starts[tid_i]] == '-';
    Py_ssize_t k = process ? 0 : tid_i;
    PyObject *key = PyUnicode_DecodeASCII(text + starts[k], stops[k] - starts[k], NULL);
    if (key == NULL)
        return -1;
    int failed;
    if (process) {
        PyObject *old = PyDict_GetItemWithError(per_interval, key);
        double total = old ? PyFloat_AS_DOUBLE(old) + share : 0.0 + share;
        PyObject *value = PyErr_Occurred() ? NULL : PyFloat_FromDouble(total);
        failed = value == NULL || PyDict_SetItem(per_interval, key, value) < 0;
        Py_XDECREF(value);
    } else {
        PyObject *shares = PyDict_GetItemWithError(per_thread, key);
        PyObject *value = PyErr_Occurred() ? NULL : PyFloat_FromDouble(share);
        if (value == NULL) {
            failed = 1;
        } else if (shares != NULL) {
            failed = PyList_Append(shares, value) < 0;
        } else {
            PyObject *fresh = PyList_New(1);
            failed = fresh == NULL;
            if (!failed) {
                Py_INCREF(value);
                PyList_SET_ITEM(fresh, 0, value);
                failed = PyDict_SetItem(per_thread, key, fresh) < 0;
                Py_DECREF(fresh);
            }
        }
        Py_XDECREF(value);
    }
    Py_DECREF(key);
    return failed ? -1 : 0;
}

/* The share rows of one line (see pidstat_shares); -1 on an error of Python's. */
static int pidstat_line(const char *text, Py_ssize_t begin, Py_ssize_t end, Py_ssize_t ncols,
                        Py_ssize_t tid_i, Py_ssize_t cpu_i, double lo, double hi,
                        PyObject *per_interval, PyObject *per_thread) {
    Py_ssize_t starts[64], stops[64];
    if (begin == end || text[begin] == '#' || text[begin] == 'L')
        return 0;
    if (tokens_of(text, begin, end, starts, stops, 64) < ncols)
        return 0;
    int ok;
    double stamp = to_float(text + starts[0], stops[0] - starts[0], &ok);
    if (!ok)
        return 0;
    double share = to_float(text + starts[cpu_i], stops[cpu_i] - starts[cpu_i], &ok);
    if (!ok || stamp < lo || stamp > hi)
        return 0;
    return add_share(per_interval, per_thread, text, starts, stops, tid_i, share);
}

PyDoc_STRVAR(pidstat_shares_doc,
"pidstat_shares(text, ncols, tid_i, cpu_i, lo, hi) -> (per_interval, per_thread) | None\n\n"
"The loop of sysstat.pidstat_cpu_summary over an ASCII text: for every line split by\n"
"str.split() that is not empty, does not begin with '#' or 'L', has at least ncols\n"
"tokens, whose token 0 (the time) and token cpu_i (%CPU) float() reads and whose time\n"
"is not outside [lo, hi]: a process row (token tid_i is '-') adds its share into\n"
"per_interval[time token], a thread row appends it to per_thread[tid token]. Returns\n"
"both dicts, or None when the text is not ASCII or the columns are out of reach.");

static PyObject *pidstat_shares(PyObject *self, PyObject *args) {
    (void)self;
    PyObject *source;
    Py_ssize_t ncols, tid_i, cpu_i;
    double lo, hi;
    if (!PyArg_ParseTuple(args, "Unnndd", &source, &ncols, &tid_i, &cpu_i, &lo, &hi))
        return NULL;
    if (!PyUnicode_IS_ASCII(source) || ncols > 64 || tid_i < 0 || cpu_i < 0 ||
        tid_i >= ncols || cpu_i >= ncols)
        Py_RETURN_NONE;
    const char *text = (const char *)PyUnicode_DATA(source);
    Py_ssize_t size = PyUnicode_GET_LENGTH(source);
    PyObject *per_interval = PyDict_New(), *per_thread = PyDict_New();
    if (per_interval == NULL || per_thread == NULL)
        goto error;
    for (Py_ssize_t begin = 0; begin <= size;) {
        const char *newline = memchr(text + begin, '\n', (size_t)(size - begin));
        Py_ssize_t end = newline ? newline - text : size;
        if (pidstat_line(text, begin, end, ncols, tid_i, cpu_i, lo, hi, per_interval,
                         per_thread) < 0)
            goto error;
        begin = end + 1;
    }
    return Py_BuildValue("(NN)", per_interval, per_thread);
error:
    Py_XDECREF(per_interval);
    Py_XDECREF(per_thread);
    return NULL;
}

/* Whether byte `c`, now at a place where the reference has another one, may be a value's:
 * the place is not fixed (a key, a line end), and with `digits` c is a digit, else no line
 * end. */
static int value_byte(unsigned char c, unsigned char fixed, int digits) {
    return !fixed && (digits ? c >= '0' && c <= '9' : c != '\n');
}

/* The first index from `i` on where a and b differ (`size` when none): eight bytes at a
 * time over the equal stretches, which are most of two snapshots. */
static Py_ssize_t next_difference(const unsigned char *a, const unsigned char *b,
                                  Py_ssize_t i, Py_ssize_t size) {
    uint64_t x, y;
    while (i + 8 <= size) {
        memcpy(&x, a + i, 8);
        memcpy(&y, b + i, 8);
        if (x != y)
            break;
        i += 8;
    }
    while (i < size && a[i] == b[i])
        i++;
    return i;
}

/* The ASCII data of str `s` of `size` bytes, NULL (no error set) when it is not that. */
static const unsigned char *ascii_of(PyObject *s, Py_ssize_t size) {
    if (!PyUnicode_IS_ASCII(s) || PyUnicode_GET_LENGTH(s) != size)
        return NULL;
    return (const unsigned char *)PyUnicode_DATA(s);
}

PyDoc_STRVAR(aligned_fits_doc,
"aligned_fits(reference, fixed, text, digits) -> bool | None\n\n"
"snapshots.Aligned.fits on text itself: every byte of the ASCII str `text` that differs from\n"
"the bytes `reference` lies where `fixed` (one byte per byte, nonzero: may not change) is\n"
"zero and is a digit (`digits`) or no line end. None when text is not ASCII of that size.");

static PyObject *aligned_fits(PyObject *self, PyObject *args) {
    (void)self;
    Py_buffer ref, fixed;
    PyObject *source;
    int digits;
    if (!PyArg_ParseTuple(args, "y*y*Up", &ref, &fixed, &source, &digits))
        return NULL;
    PyObject *out = Py_None;
    const unsigned char *text = fixed.len == ref.len ? ascii_of(source, ref.len) : NULL;
    if (text != NULL) {
        const unsigned char *r = ref.buf, *f = fixed.buf;
        out = Py_True;
        for (Py_ssize_t i = next_difference(text, r, 0, ref.len); i < ref.len;
             i = next_difference(text, r, i + 1, ref.len)) {
            if (!value_byte(text[i], f[i], digits)) {
                out = Py_False;
                break;
            }
        }
    }
    PyBuffer_Release(&ref);
    PyBuffer_Release(&fixed);
    Py_INCREF(out);
    return out;
}

/* Append line number `line` to `lines`; -1 on an error of Python's. */
static int append_line(PyObject *lines, Py_ssize_t line) {
    PyObject *number = PyLong_FromSsize_t(line);
    int failed = number == NULL || PyList_Append(lines, number) < 0;
    Py_XDECREF(number);
    return failed ? -1 : 0;
}

/* The lines in which `old` differs from `new` (both `size` bytes), as snapshots.Aligned's
 * changed_lines: a byte's line is the number of line ends (`newlines`, ascending) before
 * it. Py_None when a byte of `old` that differs is no value's. */
static PyObject *lines_changed(const unsigned char *fixed, const Py_ssize_t *newlines,
                               Py_ssize_t count, const unsigned char *new,
                               const unsigned char *old, Py_ssize_t size, int digits) {
    PyObject *lines = PyList_New(0);
    Py_ssize_t line = 0, last = -1;
    for (Py_ssize_t i = next_difference(new, old, 0, size); lines != NULL && i < size;
         i = next_difference(new, old, i + 1, size)) {
        if (!value_byte(old[i], fixed[i], digits)) {
            Py_DECREF(lines);
            Py_RETURN_NONE;
        }
        while (line < count && newlines[line] < i)
            line++;
        if (line != last && append_line(lines, line) < 0)
            Py_CLEAR(lines);
        last = line;
    }
    return lines;
}

PyDoc_STRVAR(aligned_changed_lines_doc,
"aligned_changed_lines(reference, fixed, newlines, new, old, digits) -> list[int] | None\n\n"
"snapshots.Aligned.changed_lines on the texts themselves (ASCII str of the reference's size,\n"
"`new` one that fits; `newlines` the reference's line ends, intp): the lines, in order,\n"
"in which `old` differs from `new`; None when it differs in more than values, or a text\n"
"is not ASCII of that size.");

static PyObject *aligned_changed_lines(PyObject *self, PyObject *args) {
    (void)self;
    Py_buffer ref, fixed, newlines;
    PyObject *new_source, *old_source;
    int digits;
    if (!PyArg_ParseTuple(args, "y*y*y*UUp", &ref, &fixed, &newlines, &new_source,
                          &old_source, &digits))
        return NULL;
    int usable = fixed.len == ref.len && newlines.len % (Py_ssize_t)sizeof(Py_ssize_t) == 0;
    const unsigned char *new = usable ? ascii_of(new_source, ref.len) : NULL;
    const unsigned char *old = new != NULL ? ascii_of(old_source, ref.len) : NULL;
    PyObject *out = NULL;
    if (old == NULL) {
        out = Py_None;
        Py_INCREF(out);
    } else {
        out = lines_changed(fixed.buf, newlines.buf,
                            newlines.len / (Py_ssize_t)sizeof(Py_ssize_t), new, old, ref.len,
                            digits);
    }
    PyBuffer_Release(&ref);
    PyBuffer_Release(&fixed);
    PyBuffer_Release(&newlines);
    return out;
}

static PyMethodDef methods[] = {
    {"pidstat_shares", pidstat_shares, METH_VARARGS, pidstat_shares_doc},
    {"aligned_fits", aligned_fits, METH_VARARGS, aligned_fits_doc},
    {"aligned_changed_lines", aligned_changed_lines, METH_VARARGS, aligned_changed_lines_doc},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {
    PyModuleDef_HEAD_INIT, "_speedups",
    "Compiled inner loops of the parsers (each one's Python loop is the reference).", -1,
    methods, NULL, NULL, NULL, NULL,
};

PyMODINIT_FUNC PyInit__speedups(void) { return PyModule_Create(&module); }
