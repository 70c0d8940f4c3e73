/* Memory layout shared by the device patch (patch/uvmt_patch.cu) and the page pass
 * (src/pages_pass.cpp). Plain C so both nvcc and the host compiler read it the same way;
 * any change here changes both sides at once. */
#ifndef UVMT_LAYOUT_H
#define UVMT_LAYOUT_H

/* Slot words (slot_of[], uslot[], ent_slot[]) are 64-bit: (gen << 32) | low. A word whose gen
 * is not the launch's is empty for that launch, so the tables are never cleared between
 * launches (the host bumps gen instead). `low` is (record index + 1), or one of these: */
#define UVMT_LO_CLAIM 0xFFFFFFFFu /* a warp is creating the record right now */
#define UVMT_LO_FULL 0xFFFFFFFEu  /* no record could be made: accesses go to `dropped` */
#define UVMT_MAX_RECS 0xFFFFFFF0u /* record indices stay below the two values above */

/* Flags stored in records (and written to accesses.parquet unchanged). */
#define UVMT_F_READ 1u
#define UVMT_F_WRITE 2u
#define UVMT_F_ATOMIC 4u

/* One run of consecutive pages covered by live allocations (allocations sharing a page are
 * merged, so every page has exactly one slot). Sorted by first_page (and so by slot_base). */
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

/* Per-thread-block streams (uvmtrace v1.2). Each (thread block, unit) a launch touches gets
 * one entry, made by the first warp to touch it: key = (linear block id << 32) | the slot of
 * the unit's first page, t = %globaltimer of that first touch, page_off = the touched page
 * minus the unit's first page, flags = every kind of access of the block to the unit.
 * A unit is an aligned window of 2^(12 + shift) bytes cut at segment ends; the launch's
 * level picks the shift and grows when the entry array fills (see UVMT_LEVEL_SHIFTS), so
 * entries of one launch may be at several levels: the host merges them to one unit. */
typedef struct {
  unsigned long long key;
  unsigned long long t;
  unsigned int page_off;
  unsigned int flags;
} uvmt_ent;

#define UVMT_LEVELS 6
/* pages per unit at each level: 4 KiB, 64 KiB, 2 MiB, 16 MiB, 128 MiB, 1 GiB. Level L holds
 * until the entries reach ent_cap - ent_cap / 2^(L+1). */
#define UVMT_LEVEL_SHIFTS {0u, 4u, 9u, 12u, 15u, 18u}
#define UVMT_ENT_PROBES 256u /* an insert that finds no room within this many slots drops */
/* blk_end[b] = (gen << 32) | (1 + the block's last access in units of 2^UVMT_END_SHIFT ns
 * since t0), kept with atomicMax only when it advances by a unit */
#define UVMT_END_SHIFT 10u

/* Per-launch state; the device patch receives a pointer to it as userdata. */
typedef struct {
  /* written by the device, read back after the launch (keep these first: the host reads
   * this prefix, UVMT_HEADER_BYTES, before anything else) */
  unsigned int n_touched;       /* records handed out (may exceed rec_cap: then see dropped) */
  unsigned int n_unknown;       /* distinct pages outside every live allocation */
  unsigned long long dropped;   /* accesses that found no room (unknown table or records full) */
  unsigned long long t0;        /* %globaltimer of the first recorded access (0: none yet) */
  unsigned int shift;           /* current slice width 2^shift ns (host sets UVMT_SHIFT0) */
  unsigned int slices_on;       /* host: 0 records no slices (every record gets mask 1) */
  unsigned int n_ent;           /* stream entries handed out (may exceed ent_cap) */
  unsigned int ent_level;       /* current unit level of new entries */
  unsigned long long ent_dropped; /* stream touches that found no room: the stream is lost */
  unsigned long long blk_dropped; /* touches of blocks at or beyond blk_cap (never expected) */
  unsigned int dsmem;           /* %dynamic_smem_size, as the first new block saw it */
  unsigned int dsmem_seen;
  /* configuration, set by the host before the launch */
  const uvmt_seg* segs;
  unsigned long long* ukeys;    /* open-addressing table of pages outside live allocations */
  unsigned long long* uslot;    /* their slot words */
  unsigned long long* slot_of;  /* one slot word per page covered by segs */
  uvmt_rec* recs;
  unsigned long long* ent_slot; /* open-addressing index of the stream entries */
  uvmt_ent* ents;
  unsigned long long* blk_end;  /* one word per thread block */
  unsigned long long blk_cap;   /* blocks blk_end holds (>= the grid's, else streams are off) */
  unsigned int n_segs;
  unsigned int rec_cap;
  unsigned int umask;           /* unknown table size - 1 (power of two) */
  unsigned int gen;             /* this launch's tag in the slot words (never 0) */
  unsigned int ent_cap;
  unsigned int ent_bits;        /* ent_slot has 2^ent_bits words */
  unsigned int streams_on;
  unsigned int pad;
} uvmt_state;

#define UVMT_HEADER_BYTES 64u

#endif
