/*
 * Handing the pages of CPython's free memory pools back to the operating system.
 *
 * CPython's small-object allocator (obmalloc) takes memory from the system in arenas
 * of 1 MiB, cut into pools of 16 KiB, and gives an arena back only when every pool in
 * it is free. After a load, a few objects that outlive it (a connection's last request,
 * an index entry) keep arenas that are otherwise made of free pools, and their pages
 * stay resident: 10-13 MB of the engine's memory after 200 event streams left.
 *
 * This module keeps the list of arenas (it wraps the arena allocator, a public API:
 * PyObject_SetArenaAllocator) and, when asked, releases the pages of each free pool
 * but the first one, which holds the pool's header and the link to the next free pool.
 * A free pool is one whose count of allocated blocks is 0 and whose header is
 * consistent (is_free_pool); the arena allocator also hands out the chunks of each
 * thread's frame stack, which are not tracked (arena_alloc). Its size class is set to
 * the "dummy" value obmalloc itself gives a pool it has never used, so that the next
 * use initialises it from scratch instead of following its old list of free blocks,
 * which lived in the released pages.
 *
 * The pool header's layout and the pool size are obmalloc's (CPython 3.10 to 3.13 on
 * 64-bit platforms); install() checks them against a live object and tracks nothing
 * if they do not match, and release() then does nothing. Both run with the GIL held
 * and never release it, so no other thread allocates while pools are released.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>

#if PY_VERSION_HEX < 0x030A0000 || PY_VERSION_HEX >= 0x030E0000 || SIZEOF_VOID_P != 8 \
    || defined(Py_GIL_DISABLED)
#error "the pool layout is known for CPython 3.10 to 3.13 with the GIL, on 64-bit platforms"
#endif

#include <stdint.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <unistd.h>

#define POOL_SIZE ((uintptr_t)16 * 1024)
#define ARENA_SIZE ((size_t)1024 * 1024)
#define SMALL_SIZE_CLASSES 32 /* blocks of 16 to 512 bytes */
#define DUMMY_SIZE_IDX 0xffff
#define ALIGNMENT_SHIFT 4

/* obmalloc's struct pool_header (Objects/obmalloc.c, Include/internal/pycore_obmalloc.h). */
struct pool_header {
    union {
        void *padding;
        unsigned int count;
    } ref;
    void *freeblock;
    struct pool_header *nextpool;
    struct pool_header *prevpool;
    unsigned int arenaindex;
    unsigned int szidx;
    unsigned int nextoffset;
    unsigned int maxnextoffset;
};

struct arena {
    uintptr_t address;
    size_t size;
};

static PyObjectArenaAllocator wrapped;
static struct arena *arenas = NULL;
static size_t arena_count = 0;
static size_t arena_capacity = 0;
static int installed = 0;

static void *
arena_alloc(void *ctx, size_t size)
{
    (void)ctx;
    void *address = wrapped.alloc(wrapped.ctx, size);
    /* obmalloc is not the arena allocator's only user: each thread's stack of frames
     * comes from it too, in chunks of 16 KiB and more (_PyObject_VirtualAlloc). Such a
     * chunk whose first word is NULL looks like a free pool, and releasing its pages
     * crashed the thread; only allocations of an arena's size are obmalloc's arenas. */
    if (address == NULL || size != ARENA_SIZE) {
        return address;
    }
    if (arena_count == arena_capacity) {
        size_t capacity = arena_capacity ? arena_capacity * 2 : 256;
        /* Plain realloc: the arena allocator may not call back into Python's allocators. */
        struct arena *grown = realloc(arenas, capacity * sizeof(struct arena));
        if (grown == NULL) {
            /* Untracked, never released: correct, only less memory given back. */
            return address;
        }
        arenas = grown;
        arena_capacity = capacity;
    }
    arenas[arena_count].address = (uintptr_t)address;
    arenas[arena_count].size = size;
    arena_count++;
    return address;
}

static void
arena_free(void *ctx, void *address, size_t size)
{
    (void)ctx;
    for (size_t i = 0; i < arena_count; i++) {
        if (arenas[i].address == (uintptr_t)address) {
            arenas[i] = arenas[--arena_count];
            break;
        }
    }
    wrapped.free(wrapped.ctx, address, size);
}

static struct pool_header *
pool_of(const void *block)
{
    return (struct pool_header *)((uintptr_t)block & ~(POOL_SIZE - 1));
}

/* Whether the pool is free and initialised: no block allocated, a size class whose
 * offsets agree with it, and a next free pool in the same arena (obmalloc keeps a list
 * of free pools per arena). A pool obmalloc has not cut yet is all zeros and fails the
 * offsets; so would anything that is not a pool. */
static int
is_free_pool(const struct pool_header *pool, uintptr_t arena_start, uintptr_t arena_end)
{
    if (pool->ref.count != 0 || pool->szidx >= SMALL_SIZE_CLASSES) {
        return 0;
    }
    uintptr_t block = ((uintptr_t)pool->szidx + 1) << ALIGNMENT_SHIFT;
    uintptr_t next = (uintptr_t)pool->nextpool;
    return pool->maxnextoffset == POOL_SIZE - block && pool->nextoffset <= POOL_SIZE
        && (next == 0
            || (next >= arena_start && next < arena_end && (next & (POOL_SIZE - 1)) == 0));
}

/* Whether obmalloc's pool layout is the one above: a fresh float (24 bytes, size class 1
 * of 16-byte steps) must sit in a pool whose header says so. */
static int
layout_matches(void)
{
    PyObject *probe = PyFloat_FromDouble(1.5);
    if (probe == NULL) {
        PyErr_Clear();
        return 0;
    }
    struct pool_header *pool = pool_of(probe);
    unsigned char in_core;
    /* Under another allocator (PYTHONMALLOC=malloc) the address below may not be mapped. */
    if (mincore((void *)pool, (size_t)sysconf(_SC_PAGESIZE), &in_core) != 0) {
        Py_DECREF(probe);
        return 0;
    }
    size_t step = (size_t)1 << ALIGNMENT_SHIFT;
    size_t block = (sizeof(PyFloatObject) + step - 1) / step * step;
    unsigned int szidx = (unsigned int)((block - 1) >> ALIGNMENT_SHIFT);
    int matches = pool->szidx == szidx && pool->ref.count >= 1
        && pool->maxnextoffset == POOL_SIZE - block
        && (uintptr_t)probe > (uintptr_t)pool && (uintptr_t)probe < (uintptr_t)pool + POOL_SIZE;
    Py_DECREF(probe);
    return matches;
}

static PyObject *
install(PyObject *module, PyObject *unused)
{
    (void)module;
    (void)unused;
    if (!installed) {
        if (!layout_matches()) {
            Py_RETURN_FALSE;
        }
        PyObjectArenaAllocator tracking = {NULL, arena_alloc, arena_free};
        PyObject_GetArenaAllocator(&wrapped);
        PyObject_SetArenaAllocator(&tracking);
        installed = 1;
    }
    Py_RETURN_TRUE;
}

static PyObject *
release(PyObject *module, PyObject *unused)
{
    (void)module;
    (void)unused;
    if (!installed) {
        return PyLong_FromLong(0);
    }
    size_t page_size = (size_t)sysconf(_SC_PAGESIZE);
    if (page_size == 0 || page_size >= POOL_SIZE || POOL_SIZE % page_size != 0) {
        return PyLong_FromLong(0);
    }
    size_t released = 0;
    unsigned char *in_core = NULL;
    size_t in_core_size = 0;
    for (size_t i = 0; i < arena_count; i++) {
        uintptr_t start = (arenas[i].address + POOL_SIZE - 1) & ~(POOL_SIZE - 1);
        uintptr_t end = arenas[i].address + arenas[i].size;
        if (end < start + POOL_SIZE) {
            continue;
        }
        size_t pages = (end - start) / page_size;
        if (pages > in_core_size) {
            unsigned char *grown = realloc(in_core, pages);
            if (grown == NULL) {
                break;
            }
            in_core = grown;
            in_core_size = pages;
        }
        /* Which pages are resident: a pool obmalloc has not cut from the arena yet was
         * never touched, and its header must not be read (that would map a page). */
        if (mincore((void *)start, (end - start) & ~(page_size - 1), in_core) != 0) {
            continue;
        }
        size_t pages_per_pool = POOL_SIZE / page_size;
        for (uintptr_t pool_address = start; pool_address + POOL_SIZE <= end;
             pool_address += POOL_SIZE) {
            size_t first_page = (pool_address - start) / page_size;
            if (!(in_core[first_page] & 1)) {
                continue;
            }
            struct pool_header *pool = (struct pool_header *)pool_address;
            if (!is_free_pool(pool, start, end)) {
                continue;
            }
            size_t resident = 0;
            for (size_t page = 1; page < pages_per_pool; page++) {
                resident += in_core[first_page + page] & 1;
            }
            pool->szidx = DUMMY_SIZE_IDX;
            if (resident
                && madvise((void *)(pool_address + page_size), POOL_SIZE - page_size,
                           MADV_DONTNEED) == 0) {
                released += resident * page_size;
            }
        }
    }
    free(in_core);
    return PyLong_FromSize_t(released);
}

static PyMethodDef methods[] = {
    {"install", install, METH_NOARGS,
     "Track the arenas obmalloc allocates from now on; False if its layout is not known."},
    {"release", release, METH_NOARGS,
     "Release the pages of every free pool in the tracked arenas; returns the bytes released."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module_definition = {
    .m_base = PyModuleDef_HEAD_INIT,
    .m_name = "_free_pools",
    .m_doc = "Handing the pages of CPython's free memory pools back to the operating system.",
    .m_size = -1,
    .m_methods = methods,
};

PyMODINIT_FUNC
PyInit__free_pools(void)
{
    return PyModule_Create(&module_definition);
}
