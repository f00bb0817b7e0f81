/* MPI ping-pong with every byte checked, for Open MPI's transports on the
 * software device (tests/ucx). Two ranks; for each size (empty to 4 MiB, eager
 * and rendezvous, page-aligned and not) rank 0 sends a pattern, rank 1 checks
 * it and returns its bitwise complement, rank 0 checks that; then both ranks
 * exchange at once with non-blocking calls. Prints "pingpong: PASS" on rank 0
 * and exits 0 only when every check held on both ranks.
 */
#include <mpi.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum { ROUNDS = 4, MAX_SIZE = 4 << 20, OFFSET = 3 };

static const int sizes[] = {0, 1, 7, 64, 1000, 4095, 4096, 8193, 65536, 65537, 1 << 20, MAX_SIZE};

/* A byte that depends on position, size, round and sender. */
static unsigned char pattern(size_t i, int size, int round, int from)
{
	uint32_t x = (uint32_t)i * 2654435761u ^ (uint32_t)size * 40503u ^ (uint32_t)round << 24 ^
		     (uint32_t)from << 30;
	return (unsigned char)(x >> 13 ^ x);
}

static void fill(unsigned char *b, int size, int round, int from, int complement)
{
	for (int i = 0; i < size; i++)
		b[i] = pattern(i, size, round, from) ^ (complement ? 0xff : 0);
}

/* Counts an error and says where when a byte of b differs from the pattern. */
static void check(const unsigned char *b, int size, int round, int from, int complement, int rank,
		  const char *what, int *errors)
{
	for (int i = 0; i < size; i++)
		if (b[i] != (unsigned char)(pattern(i, size, round, from) ^ (complement ? 0xff : 0))) {
			fprintf(stderr, "pingpong: rank %d, round %d, %d bytes: byte %d wrong %s\n", rank,
				round, size, i, what);
			++*errors;
			return;
		}
}

int main(int argc, char **argv)
{
	int rank, nranks, errors = 0, total;
	MPI_Init(&argc, &argv);
	MPI_Comm_rank(MPI_COMM_WORLD, &rank);
	MPI_Comm_size(MPI_COMM_WORLD, &nranks);
	if (nranks != 2) {
		if (rank == 0)
			fprintf(stderr, "pingpong: needs exactly 2 ranks, got %d\n", nranks);
		MPI_Abort(MPI_COMM_WORLD, 2);
	}
	const int peer = 1 - rank;
	/* Send and receive buffers, used both page-aligned and at an odd offset. */
	unsigned char *sbase = malloc(MAX_SIZE + OFFSET), *rbase = malloc(MAX_SIZE + OFFSET);
	if (!sbase || !rbase)
		MPI_Abort(MPI_COMM_WORLD, 2);

	for (int round = 0; round < ROUNDS; round++) {
		const int off = (round & 1) ? OFFSET : 0;
		unsigned char *s = sbase + off, *r = rbase + off;
		for (size_t k = 0; k < sizeof(sizes) / sizeof(sizes[0]); k++) {
			const int size = sizes[k];
			/* Ping-pong: 0 -> 1, 1 returns the complement. */
			if (rank == 0) {
				fill(s, size, round, 0, 0);
				MPI_Send(s, size, MPI_BYTE, 1, k, MPI_COMM_WORLD);
				memset(r, 0x5a, size);
				MPI_Recv(r, size, MPI_BYTE, 1, k, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
				check(r, size, round, 0, 1, rank, "on return", &errors);
			} else {
				memset(r, 0x5a, size);
				MPI_Recv(r, size, MPI_BYTE, 0, k, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
				check(r, size, round, 0, 0, rank, "on arrival", &errors);
				for (int i = 0; i < size; i++)
					s[i] = r[i] ^ 0xff;
				MPI_Send(s, size, MPI_BYTE, 0, k, MPI_COMM_WORLD);
			}
			/* Both directions at once. */
			MPI_Request req[2];
			fill(s, size, round, rank, 0);
			memset(r, 0xa5, size);
			MPI_Irecv(r, size, MPI_BYTE, peer, 1000 + k, MPI_COMM_WORLD, &req[0]);
			MPI_Isend(s, size, MPI_BYTE, peer, 1000 + k, MPI_COMM_WORLD, &req[1]);
			MPI_Waitall(2, req, MPI_STATUSES_IGNORE);
			check(r, size, round, peer, 0, rank, "in the exchange", &errors);
		}
	}
	MPI_Allreduce(&errors, &total, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
	if (rank == 0)
		printf("pingpong: %s (%d rounds of %zu sizes up to %d bytes, %d errors)\n",
		       total ? "FAIL" : "PASS", ROUNDS, sizeof(sizes) / sizeof(sizes[0]), MAX_SIZE, total);
	free(sbase);
	free(rbase);
	MPI_Finalize();
	return total ? 1 : 0;
}
