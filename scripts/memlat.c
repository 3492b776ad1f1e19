/* Memory-latency probe used in docs/benchmarks.md: a dependent pointer chase over a
 * shuffled array. Build: gcc -O2 -o memlat scripts/memlat.c; run: ./memlat BYTES HUGE(0|1) */
#include <stdio.h>
#include <stdlib.h>
#include <stdint.h>
#include <time.h>
#include <sys/mman.h>
int main(int argc,char**argv){ size_t n=(size_t)atol(argv[1])/8; int huge=atoi(argv[2]);
 uint64_t*a; a=mmap(0,n*8,PROT_READ|PROT_WRITE,MAP_PRIVATE|MAP_ANONYMOUS,-1,0);
 if(huge) madvise(a,n*8,MADV_HUGEPAGE);
 for(size_t i=0;i<n;i++)a[i]=i;
 uint64_t x=88172645463325252ULL; for(size_t i=n-1;i>0;i--){x^=x<<13;x^=x>>7;x^=x<<17; size_t j=x%(i+1); uint64_t t=a[i];a[i]=a[j];a[j]=t;}
 struct timespec t0,t1; clock_gettime(CLOCK_MONOTONIC,&t0); uint64_t p=0; for(int i=0;i<2000000;i++) p=a[p];
 clock_gettime(CLOCK_MONOTONIC,&t1); printf("%zu MB huge=%d: %.1f ns/access (%lu)\n", n*8>>20, huge, ((t1.tv_sec-t0.tv_sec)*1e9+(t1.tv_nsec-t0.tv_nsec))/2e6, p); return 0;}
