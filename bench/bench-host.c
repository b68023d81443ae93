/* The machine a benchmark ran on (see bench-host.h). */
#include "bench-host.h"

#include <stdio.h>
#include <string.h>

void bench_cpu_model(char *buf, size_t len)
{
	FILE *f = fopen("/proc/cpuinfo", "re");
	char line[512];

	snprintf(buf, len, "unknown CPU");
	while (f && fgets(line, sizeof(line), f)) {
		char *colon = strchr(line, ':');

		if (strncmp(line, "model name", 10) == 0 && colon) {
			colon += 1 + strspn(colon + 1, " \t");
			colon[strcspn(colon, "\n")] = '\0';
			snprintf(buf, len, "%s", colon);
			break;
		}
	}
	if (f)
		fclose(f);
}

void bench_load_average(char *buf, size_t len)
{
	FILE *f = fopen("/proc/loadavg", "re");
	double l[3];

	if (f && fscanf(f, "%lf %lf %lf", &l[0], &l[1], &l[2]) == 3)
		snprintf(buf, len, "%.2f %.2f %.2f", l[0], l[1], l[2]);
	else
		snprintf(buf, len, "unknown");
	if (f)
		fclose(f);
}
