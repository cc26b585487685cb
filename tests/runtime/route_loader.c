/* Not linked with any MPI: opens the MPI program built as a shared object
 * (route.c with -DROUTE_LIB, argv[1]) with dlopen(RTLD_LOCAL), as Python opens
 * mpi4py, and runs it. The MPI arrives after libvhpc_wait was loaded. */
#include <dlfcn.h>
#include <stdio.h>

int main(int argc, char **argv)
{
    if (argc < 2) {
        fprintf(stderr, "usage: %s ROUTE_LIB.so\n", argv[0]);
        return 2;
    }
    void *lib = dlopen(argv[1], RTLD_NOW | RTLD_LOCAL);
    if (!lib) {
        fprintf(stderr, "route_loader: %s\n", dlerror());
        return 2;
    }
    int (*run)(int, char **) = (int (*)(int, char **))dlsym(lib, "route_lib_main");
    if (!run) {
        fprintf(stderr, "route_loader: %s\n", dlerror());
        return 2;
    }
    return run(argc - 1, argv + 1);
}
