/* Memory layout shared by the device patch (patch/uvmt_patch.cu) and the page pass
 * (src/pages_pass.cpp). Plain C so both nvcc and the host compiler read it the same way;
 * any change here changes both sides at once. */
#ifndef UVMT_LAYOUT_H
#define UVMT_LAYOUT_H

/* Values of slot_of[] / uslot[] entries. Anything else is (record index + 1). */
#define UVMT_SLOT_EMPTY 0u
#define UVMT_SLOT_CLAIM 0xFFFFFFFFu /* a warp is creating the record right now */
#define UVMT_SLOT_FULL 0xFFFFFFFEu  /* no record could be made: accesses go to `dropped` */

/* Flags stored in records (and written to accesses.parquet unchanged). */
#define UVMT_F_READ 1u
#define UVMT_F_WRITE 2u
#define UVMT_F_ATOMIC 4u

/* One run of consecutive pages covered by live allocations (allocations sharing a page are
 * merged, so every page has exactly one slot). Sorted by first_page. */
typedef struct {
  unsigned long long first_page;
  unsigned long long end_page; /* exclusive */
  unsigned long long slot_base;
} uvmt_seg;

/* Time slices (re-touch structure). A launch's run is cut into slices of 2^shift ns of
 * %globaltimer, counted from its first recorded access (t0). Each record keeps a word
 * (shift << 56) | mask: bit i of the 56-bit mask is slice i at that shift. The launch's shift
 * starts at UVMT_SHIFT0 and grows (slices double in width) whenever an access would fall in
 * slice 56 or later; a record still at a smaller shift is folded (adjacent bit pairs ORed)
 * the next time it is updated, and by the host at read-back. */
#define UVMT_SHIFT0 10u /* 1.024 us */
#define UVMT_MASK_BITS 56u
#define UVMT_MASK ((1ull << UVMT_MASK_BITS) - 1ull)

/* One touched page of one launch. Its index in the record array is its first-touch rank.
 * `slices` is the packed word above on the device; the host writes the mask folded to the
 * launch's final shift (no shift bits) to the raw file. */
typedef struct {
  unsigned long long page;
  unsigned int count;
  unsigned int flags;
  unsigned long long slices;
} uvmt_rec;

/* Per-launch state; the device patch receives a pointer to it as userdata. */
typedef struct {
  /* written by the device, read back after the launch (keep these first: the host reads
   * only this prefix when nothing was touched) */
  unsigned int n_touched;       /* records handed out (may exceed rec_cap: then see dropped) */
  unsigned int n_unknown;       /* distinct pages outside every live allocation */
  unsigned long long dropped;   /* accesses that found no room (unknown table or records full) */
  unsigned long long t0;        /* %globaltimer of the first recorded access (0: none yet) */
  unsigned int shift;           /* current slice width 2^shift ns (host sets UVMT_SHIFT0) */
  unsigned int slices_on;       /* host: 0 records no slices (every record gets mask 1) */
  /* configuration, set by the host before the launch */
  const uvmt_seg* segs;
  unsigned long long* ukeys;    /* open-addressing table of pages outside live allocations */
  unsigned int* uslot;
  unsigned int* slot_of;        /* one entry per page covered by segs */
  uvmt_rec* recs;
  unsigned int n_segs;
  unsigned int rec_cap;
  unsigned int umask;           /* table size - 1 (power of two) */
  unsigned int pad;
} uvmt_state;

#define UVMT_HEADER_BYTES 32u

#endif
