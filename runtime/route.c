/* Which MPI this process runs, and so where the library's MPI entry points lead.
 *
 * The library is built for one MPI (its headers, its handle types, its Fortran
 * layer) but has no DT_NEEDED on it and only weak references to it: preloaded into
 * a process that runs another MPI (Open MPI for an MPICH build, another MPICH
 * installation such as PyPI's wheel, or the same MPI in another version) it must
 * neither load a second MPI nor call into the wrong one with the wrong types.
 * Every exported MPI symbol is a trampoline (trampolines.sh) that jumps on
 * vw_route: to the library's own function (VW_ROUTE_OWN), or to the process's MPI
 * function of the same name, found with dlsym (VW_ROUTE_MPI). Either way the
 * arguments are passed on untouched, so the program runs unmodified.
 *
 * The MPI is identified by its MPI_Get_library_version, which MPI allows before
 * MPI_Init and whose arguments are the same in every MPI. A program linked with
 * its MPI has it loaded before the library's constructor runs; an MPI loaded later
 * (Python's mpi4py opens it with dlopen) is identified at the first MPI call, from
 * the caller's own dependencies. */
#define _GNU_SOURCE
#include "vhpc_wait.h"

#include <dlfcn.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum { VW_ROUTE_OWN = 0, VW_ROUTE_MPI = 1, VW_ROUTE_UNDECIDED = 2 };
int vw_route = VW_ROUTE_UNDECIDED; /* read by every trampoline; written once */

/* Generated with the trampolines: the exported names, and where each leads in the
 * process's MPI once the library stands aside. */
extern void *vw_next[];
extern const char *const vw_entry_names[];
extern const int vw_entry_count;

#define STR_(x) #x
#define STR(x) STR_(x)
/* What the library was built for, as library_version() below names a process's MPI.
 * Built with the MPI standard ABI's header (mpi_abi.h, MPI 5.0): any MPI that runs
 * that ABI, whatever its implementation. Built with another MPI's headers (Intel
 * MPI's runtime has none: MPICH's, whose ABI it shares), the build names it
 * (-DVW_BUILT_FOR='"Intel MPI 2021.18.1"'). */
#if defined(MPI_ABI_VERSION)
#define VW_STANDARD_ABI 1
#define BUILT_FOR "MPI ABI " STR(MPI_ABI_VERSION) "." STR(MPI_ABI_SUBVERSION)
#elif defined(VW_BUILT_FOR)
#define BUILT_FOR VW_BUILT_FOR
#elif defined(MPICH_VERSION)
#define BUILT_FOR "MPICH " MPICH_VERSION
#elif defined(OPEN_MPI)
#define BUILT_FOR                                                                 \
    "Open MPI " STR(OMPI_MAJOR_VERSION) "." STR(OMPI_MINOR_VERSION) "." STR(OMPI_RELEASE_VERSION)
#else
#error "libvhpc_wait knows MPICH (and its ABI: Intel MPI), Open MPI and the MPI standard ABI"
#endif
#ifndef VW_STANDARD_ABI
#define VW_STANDARD_ABI 0
#endif
#ifdef MPI_ABI_VERSION
#define MPI_ABI_VERSION_OR(x) MPI_ABI_VERSION
#define MPI_ABI_SUBVERSION_OR(x) MPI_ABI_SUBVERSION
#else
#define MPI_ABI_VERSION_OR(x) (x)
#define MPI_ABI_SUBVERSION_OR(x) (x)
#endif

/* In the file, for `vhpc run` and `vhpc runtime list` to read without loading it. */
__attribute__((used)) const char vw_built_for_tag[] = "VHPC_WAIT_BUILT_FOR=" BUILT_FOR;

typedef int (*version_fn)(char *version, int *resultlen);

typedef int (*abi_version_fn)(int *abi_major, int *abi_minor);

/* "MPICH 4.0.2" from "MPICH Version:\t4.0.2\n...", "Open MPI 4.1.4" from
 * "Open MPI v4.1.4, package: ...", "Intel MPI 2021.18.1" from "Intel(R) MPI
 * Library 2021.18.1 for Linux* OS"; else the first line as it is. (The same
 * parsing is python/vhpc/runtime/discover.py's library_name.) */
static void library_version(version_fn fn, char *out, size_t len) {
    static char raw[16384]; /* larger than any MPI_MAX_LIBRARY_VERSION_STRING */
    int n = 0;
    if (fn(raw, &n) != 0) n = 0;
    raw[n > 0 && (size_t)n < sizeof raw ? n : 0] = '\0';
    char word[64];
    if (sscanf(raw, "MPICH Version: %63s", word) == 1)
        snprintf(out, len, "MPICH %s", word);
    else if (sscanf(raw, "Open MPI v%63[0-9.]", word) == 1)
        snprintf(out, len, "Open MPI %s", word);
    else if (sscanf(raw, "Intel(R) MPI Library %63[0-9.]", word) == 1)
        snprintf(out, len, "Intel MPI %s", word);
    else
        snprintf(out, len, "%.*s", (int)strcspn(raw, "\n"), raw);
}

/* The MPI standard ABI version the object defining `fn` runs (MPICH 5.0's and
 * Intel MPI's libmpi_abi.so.1: 1.0), or major -1: its own ABI (their libmpi.so.12
 * also has MPI_Abi_get_version, and says -1). */
static int standard_abi(version_fn fn, int *minor) {
    int major = -1;
    *minor = -1;
    Dl_info info;
    if (!dladdr((void *)fn, &info) || !info.dli_fname) return -1;
    void *self = dlopen(info.dli_fname, RTLD_LAZY | RTLD_NOLOAD);
    abi_version_fn abi = self ? (abi_version_fn)dlsym(self, "MPI_Abi_get_version") : NULL;
    if (!abi || abi(&major, minor) != 0) major = -1;
    return major;
}

static void stand_aside(void *lookup, const char *why) {
    for (int i = 0; i < vw_entry_count; i++) vw_next[i] = dlsym(lookup, vw_entry_names[i]);
    fprintf(stderr, "vhpc_wait: built for %s, %s: not intercepting, the program runs as "
                    "without libvhpc_wait\n", BUILT_FOR, why);
    __atomic_store_n(&vw_route, VW_ROUTE_MPI, __ATOMIC_RELEASE);
}

/* `lookup` finds the process's MPI functions: RTLD_NEXT for an MPI in the global
 * scope, else a handle on the caller's object. `late`: loaded after the library. */
static void decide(version_fn fn, void *lookup, int late) {
    char found[256], named[320], why[512];
    library_version(fn, found, sizeof found);
    int abi_minor, abi_major = standard_abi(fn, &abi_minor);
    int same;
    if (abi_major >= 0) {
        snprintf(named, sizeof named, "MPI ABI %d.%d (%s)", abi_major, abi_minor, found);
        same = VW_STANDARD_ABI && abi_major == MPI_ABI_VERSION_OR(-2) &&
               abi_minor >= MPI_ABI_SUBVERSION_OR(0);
    } else {
        snprintf(named, sizeof named, "%s", found);
        same = !VW_STANDARD_ABI && strcmp(found, BUILT_FOR) == 0;
    }
    if (!same) {
        snprintf(why, sizeof why, "this process runs %s", named);
        stand_aside(lookup, why);
        return;
    }
    if (late) {
        /* The library's references to the MPI were resolved, to nothing, when it was
         * loaded: data at once (Open MPI's predefined handles are data), functions
         * too under LD_BIND_NOW; MPICH's C side refers to functions only. */
        const char *bind_now = getenv("LD_BIND_NOW");
#ifdef OPEN_MPI
        const int data_refs = 1;
#else
        const int data_refs = 0;
#endif
        if (data_refs || (bind_now && *bind_now)) {
            snprintf(why, sizeof why, "which this process loaded after start-up%s",
                     data_refs ? "" : " under LD_BIND_NOW");
            stand_aside(lookup, why);
            return;
        }
        /* Into the global scope, where the library's PMPI_* references look. */
        Dl_info info;
        if (dladdr((void *)fn, &info) && info.dli_fname)
            dlopen(info.dli_fname, RTLD_LAZY | RTLD_NOLOAD | RTLD_GLOBAL);
    }
    __atomic_store_n(&vw_route, VW_ROUTE_OWN, __ATOMIC_RELEASE);
}

__attribute__((constructor)) static void route_at_load(void) {
    version_fn fn = (version_fn)dlsym(RTLD_DEFAULT, "MPI_Get_library_version");
    if (fn) decide(fn, RTLD_NEXT, 0); /* else: at the first MPI call */
}

/* From vw_route_slow: the first MPI call of a process whose MPI was not loaded
 * with the library. `caller` is that call's return address. */
void vw_route_decide(void *caller) {
    static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
    pthread_mutex_lock(&lock);
    if (__atomic_load_n(&vw_route, __ATOMIC_ACQUIRE) == VW_ROUTE_UNDECIDED) {
        void *lookup = RTLD_NEXT;
        version_fn fn = (version_fn)dlsym(RTLD_DEFAULT, "MPI_Get_library_version");
        Dl_info info;
        if (!fn && dladdr(caller, &info) && info.dli_fname) {
            /* Loaded with RTLD_LOCAL: the caller's object sees it among its own. */
            void *self = dlopen(info.dli_fname, RTLD_LAZY | RTLD_NOLOAD);
            if (self && (fn = (version_fn)dlsym(self, "MPI_Get_library_version"))) lookup = self;
        }
        if (!fn) {
            fprintf(stderr, "vhpc_wait: an MPI function was called, but no MPI library is "
                            "loaded\n");
            abort();
        }
        decide(fn, lookup, 1);
    }
    pthread_mutex_unlock(&lock);
}

int vw_resolves(const char *name) { return dlsym(RTLD_DEFAULT, name) != NULL; }
