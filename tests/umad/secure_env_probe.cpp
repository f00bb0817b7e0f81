// secure_env_probe: prints what umad_get_cas_names() sees.  Linked
// statically against the library objects so that it can run setuid (the
// dynamic loader would ignore LD_LIBRARY_PATH there).  secure-env.sh runs it
// once normally and once setuid with OPENVERBS_UMAD_SYSFS_ROOT pointing at a
// fixture: the override must only be honoured in the first case.
#include <infiniband/umad.h>

#include <cstdio>
#include <unistd.h>

int main()
{
	char cas[UMAD_MAX_DEVICES][UMAD_CA_NAME_LEN] = {};
	int n = umad_get_cas_names(cas, UMAD_MAX_DEVICES);
	printf("uid %d euid %d cas %d:", static_cast<int>(getuid()), static_cast<int>(geteuid()), n);
	for (int i = 0; i < n && i < UMAD_MAX_DEVICES; ++i)
		printf(" %s", cas[i]);
	printf("\n");
	return 0;
}
