// speckv KV codec: page encoder (docs/codec.md §1-§9).
//
// Implements record modes 0 (raw) and 1 (paper: b=8, page scale, linear
// delta, RLE) and 2 (int8: b=8, page scale, no delta, bytes), with the
// bypass rule of §7, for dtypes 0..3. A page arrives as DW-bit beats
// (in_nbytes valid bytes per beat, BB on every beat but the last; in_last on
// the last). cfg_* are sampled with the first beat of a page. The record
// leaves as DW-bit beats of record bytes, out_nbytes valid, out_last on the
// last one. Any other known cfg_mode (3..17: channel/token scales, Rice,
// b > 8) is not implemented here and is stored raw.
//
// Preconditions (the C++ encode() returns SPECKV_EINVAL for these):
// 1 <= page bytes <= MAX_BYTES, a whole number of elements, a known mode id.
//
// Three stages, each on its own page, hand pages on when the next is idle
// (see fpga/README.md); cycles for a page of N beats, E elements per beat:
//   LOAD   N cycles, II=1 on the input: page RAM, max |x|, non-finite, raw CRC
//   MIDDLE PREP 1 (scale field, reciprocal, layout C), COMP N + D + 2 (quantise,
//          delta, RLE with a look-ahead of D = WS/E beats, pack into the payload
//          RAM), FLUSH 1, FIN 1 (bypass decision, header)
//   BACK   CRC LB cycles (shift of the header CRC by the payload length), HDR 1,
//          EMIT ceil(record/BB) cycles at II=1 while out_ready stays high (+2)
// Steady state: one page per max(LOAD, MIDDLE, BACK) cycles (MIDDLE: 74 for a
// 4 KiB FP16 page at DW=512, against the ideal 64).
`default_nettype none
module speckv_enc #(
  parameter integer DW = 512,           // data width in bits, multiple of 64, >= 256
  parameter integer MAX_BYTES = 4096    // largest page in bytes, multiple of DW/8
) (
  input  wire                       clk,
  input  wire                       rst,
  input  wire                       in_valid,
  output wire                       in_ready,
  input  wire [DW-1:0]              in_data,
  input  wire [$clog2(DW/8+1)-1:0]  in_nbytes,
  input  wire                       in_last,
  input  wire [7:0]                 cfg_mode,
  input  wire [7:0]                 cfg_dtype,
  input  wire [15:0]                cfg_channels,
  output reg                        out_valid,
  input  wire                       out_ready,
  output reg  [DW-1:0]              out_data,
  output reg  [$clog2(DW/8+1)-1:0]  out_nbytes,
  output reg                        out_last
);
  localparam integer BB = DW / 8;                 // bytes per beat
  localparam integer NBW = $clog2(BB + 1);
  localparam integer EMAX = BB / 2;               // elements per beat (16-bit dtypes)
  // RLE look-ahead window: a block of E bytes plus the 130 bytes a token can see.
  localparam integer WS = EMAX * ((EMAX + 130 + EMAX - 1) / EMAX);
  localparam integer PD = MAX_BYTES / BB;         // page RAM / payload RAM depth
  localparam integer AW = (PD > 1) ? $clog2(PD) : 1;
  localparam integer LB = $clog2(MAX_BYTES + 1);  // bits of a payload length
  localparam integer FD = 4;                      // EMIT prefetch FIFO depth

  `include "speckv_codec_fn.vh"

  // middle stage (PREP..FIN) and back stage (CRC..EMIT)
  localparam [2:0] S_IDLE = 3'd0, S_PREP = 3'd1, S_COMP = 3'd2, S_FLUSH = 3'd3, S_FIN = 3'd4;
  localparam [1:0] B_IDLE = 2'd0, B_CRC = 2'd1, B_HDR = 2'd2, B_EMIT = 2'd3;

  reg [2:0] st;
  reg [1:0] sb;

  // ---------------------------------------------------------------- front end (LOAD)
  // Three stages work on three pages at once: LOAD (front) fills page RAM bank
  // fbank, PREP..FIN (middle) reads bank mbank and writes payload bank pmb,
  // CRC..EMIT (back) sends the page of bank ebank / payload bank pbb. A stage
  // hands its page over when the next stage is idle.
  reg         f_first;         // next input beat is the first of a page
  reg         f_full;          // a whole page is loaded, not yet handed over
  reg  [1:0]  fbank, mbank, ebank;  // page RAM banks (0..2) of the three stages
  reg         pmb, pbb;        // payload RAM banks of the middle / back stage
  reg [7:0]   f_mode, f_dtype;
  reg [15:0]  f_ch;
  reg [31:0]  f_tot, f_amax, f_craw;
  reg [AW:0]  f_nbeats;
  reg         f_nonfin;

  // ---------------------------------------------------------------- back-end page registers
  reg [7:0]   mode_r, dtype_r;
  reg [15:0]  ch_r;
  reg [31:0]  tot;             // page bytes
  reg [AW:0]  nbeats;          // page beats
  reg [31:0]  amax;            // max of (u & 0x7FFFFF00)
  reg         nonfin;
  reg [31:0]  craw;            // CRC register from 0 over the page bytes

  // per-page derived values (PREP)
  reg [31:0]  n_el;            // elements
  reg [15:0]  lay_c;           // C written in a quantised header
  reg [15:0]  scale_f;
  reg [7:0]   scale_es;
  reg [15:0]  scale_r;
  reg         is_raw;          // middle stage: the page is stored raw
  reg         e_raw;           // back stage: the record being sent is raw
  reg         use_delta, use_rle;
  reg [7:0]   ebeat;           // elements (= d-bytes) per beat: EMAX or EMAX/2
  reg [7:0]   dwin;            // WS / ebeat

  // ---------------------------------------------------------------- RAMs
  // page RAM: 3 banks, two copies (one read port for the middle stage, one for
  // the back stage, which reads it to send a raw record)
  reg           pg_we;
  reg  [AW+1:0] pg_wa;
  reg           pg_re, pr_re;
  reg  [AW+1:0] pg_ra, pr_ra;
  wire [DW-1:0] pg_rd, pr_rd;
  speckv_sdp_ram #(.W(DW), .D(3 << AW), .AW(AW + 2)) u_page (
    .clk(clk), .we(pg_we), .wa(pg_wa), .wd(in_data), .re(pg_re), .ra(pg_ra), .rd(pg_rd));
  speckv_sdp_ram #(.W(DW), .D(3 << AW), .AW(AW + 2)) u_page_b (
    .clk(clk), .we(pg_we), .wa(pg_wa), .wd(in_data), .re(pr_re), .ra(pr_ra), .rd(pr_rd));

  reg           pl_we;
  reg  [AW:0]   pl_wa;
  reg  [DW-1:0] pl_wd;
  reg           pl_re;
  reg  [AW:0]   pl_ra;
  wire [DW-1:0] pl_rd;
  speckv_sdp_ram #(.W(DW), .D(2 << AW), .AW(AW + 1)) u_pay (
    .clk(clk), .we(pl_we), .wa(pl_wa), .wd(pl_wd), .re(pl_re), .ra(pl_ra), .rd(pl_rd));

  // ---------------------------------------------------------------- LOAD: beat analysis
  assign in_ready = !f_full;
  wire       in_fire = in_valid && in_ready;
  wire [7:0] dt_now = f_first ? cfg_dtype : f_dtype;
  wire       handoff = f_full && (st == S_IDLE);

  reg [31:0] ld_max;
  reg        ld_nonfin;
  reg [31:0] ld_u;
  integer    li;
  always @(*) begin
    ld_max = 32'd0;
    li = 0;
    ld_nonfin = 1'b0;
    ld_u = 32'd0;
    if (dt_now == 8'd1 || dt_now == 8'd2) begin
      for (li = 0; li < EMAX; li = li + 1)
        if (li * 2 < in_nbytes) begin
          ld_u = canon_elem(dt_now, {16'd0, in_data[li*16 +: 16]});
          if (ld_u[30:0] >= 31'h7F800000) ld_nonfin = 1'b1;
          if ((ld_u & 32'h7FFFFF00) > ld_max) ld_max = ld_u & 32'h7FFFFF00;
        end
    end else if (dt_now == 8'd3) begin
      for (li = 0; li < BB / 4; li = li + 1)
        if (li * 4 < in_nbytes) begin
          ld_u = in_data[li*32 +: 32];
          if (ld_u[30:0] >= 31'h7F800000) ld_nonfin = 1'b1;
          if ((ld_u & 32'h7FFFFF00) > ld_max) ld_max = ld_u & 32'h7FFFFF00;
        end
    end
  end

  // ---------------------------------------------------------------- PREP: scale (§3.2)
  reg [15:0] pr_mm;
  reg [7:0]  pr_em;
  reg [31:0] pr_ms1, pr_ms;
  reg [7:0]  pr_j;
  reg [31:0] pr_n;
  reg        pr_range_bad;
  reg [31:0] pr_r;
  always @(*) begin
    pr_em = amax[30:23];
    pr_mm = {1'b1, amax[22:8]};
    pr_ms1 = (({16'd0, pr_mm} << 7) + 32'd32511) / 32'd32512;     // b = 8: 256*Q = 32512
    if (pr_ms1 >= 32'd256) begin
      pr_j = 8'd6;
      pr_ms = (({16'd0, pr_mm} << 6) + 32'd32511) / 32'd32512;
    end else begin
      pr_j = 8'd7;
      pr_ms = pr_ms1;
    end
    pr_range_bad = (amax >= 32'h00800000) && (pr_em < 8'd27 || pr_em > 8'd226);
    pr_r = 32'h7FFFFF / ((pr_ms == 32'd0) ? 32'd1 : pr_ms);
    case (dtype_r)
      8'd3:    pr_n = tot >> 2;
      8'd0:    pr_n = tot;
      default: pr_n = tot >> 1;
    endcase
  end

  // ---------------------------------------------------------------- COMP: quantise + delta
  reg  [AW:0]    rk;          // next page word to read
  reg            v1;          // pg_rd holds a page beat this cycle
  reg  [7:0]     prev_q;      // q of the last element of the previous beat
  reg  [15:0]    nshift;
  reg  [31:0]    pbase;       // position of window slot 0
  reg  [WS*8-1:0] win;        // d-bytes, slot 0 oldest
  reg  [7:0]     rem;         // positions left in the current RLE token
  reg            lit;         // the current token is a literal
  reg  [2*BB*8-1:0] acc;      // packer
  reg  [NBW:0]   fill;
  reg  [AW:0]    pwa;
  reg  [31:0]    ccmp;        // CRC register from 0 over the payload
  reg  [31:0]    plen;

  reg [EMAX*8-1:0] qd;        // d-bytes of the beat in pg_rd
  reg [7:0]        qd_last;   // q of the beat's last element
  reg [7:0]        qq, qp;
  integer          qi;
  always @(*) begin
    qd = {EMAX*8{1'b0}};
    qi = 0;
    qp = prev_q;
    qq = 8'd0;
    if (dtype_r == 8'd3) begin
      for (qi = 0; qi < BB / 4; qi = qi + 1) begin
        qq = quant_one(pg_rd[qi*32 +: 32], scale_es, scale_r, 8'd127);
        qd[qi*8 +: 8] = use_delta ? (qq - qp) : qq;
        qp = qq;
      end
    end else begin
      for (qi = 0; qi < EMAX; qi = qi + 1) begin
        qq = quant_one(canon_elem(dtype_r, {16'd0, pg_rd[qi*16 +: 16]}), scale_es, scale_r, 8'd127);
        qd[qi*8 +: 8] = use_delta ? (qq - qp) : qq;
        qp = qq;
      end
    end
    qd_last = qp;
  end

  // ---------------------------------------------------------------- COMP: RLE tokens (§6.1)
  // er[x]: equal bytes from slot x (capped at 130); litl[x]: length of a literal
  // starting at x (next slot that starts a run of >= 3 or is past n, capped at 128).
  reg [WS*8-1:0]   er, litl;
  reg [BB*8-1:0]   ebuf;      // token bytes produced this cycle, compacted
  reg [NBW:0]      ec;
  reg [EMAX*2-1:0] ecnt;      // bytes produced at each position (0..2)
  reg [EMAX*8-1:0] e0, e1, eoff;
  reg [7:0]        rem_n;
  reg              lit_n;
  reg              vx, vx1, stop1;
  reg [7:0]        bx, erx;
  integer          ti, to;
  always @(*) begin
    er = {WS*8{1'b0}};
    ti = 0;
    to = 0;
    litl = {WS*8{1'b0}};
    for (ti = WS - 1; ti >= 0; ti = ti - 1) begin
      vx = (pbase + ti) < n_el;
      vx1 = (ti + 1 < WS) && ((pbase + ti + 1) < n_el);
      if (!vx)
        er[ti*8 +: 8] = 8'd0;
      else if (ti + 1 < WS && vx1 && win[((ti+1)%WS)*8 +: 8] == win[ti*8 +: 8])
        er[ti*8 +: 8] = (er[((ti+1)%WS)*8 +: 8] >= 8'd130) ? 8'd130 : er[((ti+1)%WS)*8 +: 8] + 8'd1;
      else
        er[ti*8 +: 8] = 8'd1;
      stop1 = (ti + 1 >= WS) || !vx1 || (er[((ti+1)%WS)*8 +: 8] >= 8'd3);
      if (stop1)
        litl[ti*8 +: 8] = 8'd1;
      else
        litl[ti*8 +: 8] = (litl[((ti+1)%WS)*8 +: 8] >= 8'd128) ? 8'd128 : litl[((ti+1)%WS)*8 +: 8] + 8'd1;
    end

    // token bytes of each position: e0/e1 (ecnt of them), state carried in order
    ecnt = {EMAX*2{1'b0}};
    e0 = {EMAX*8{1'b0}};
    e1 = {EMAX*8{1'b0}};
    rem_n = rem;
    lit_n = lit;
    bx = 8'd0;
    erx = 8'd0;
    for (ti = 0; ti < EMAX; ti = ti + 1)
      if (ti < ebeat && (pbase + ti) < n_el) begin
        bx = win[ti*8 +: 8];
        erx = er[ti*8 +: 8];
        if (!use_rle) begin
          e0[ti*8 +: 8] = bx;
          ecnt[ti*2 +: 2] = 2'd1;
        end else if (rem_n == 8'd0) begin
          ecnt[ti*2 +: 2] = 2'd2;
          e1[ti*8 +: 8] = bx;
          if (erx >= 8'd3) begin
            e0[ti*8 +: 8] = 8'h80 | (erx - 8'd3);
            rem_n = erx - 8'd1;
            lit_n = 1'b0;
          end else begin
            e0[ti*8 +: 8] = litl[ti*8 +: 8] - 8'd1;
            rem_n = litl[ti*8 +: 8] - 8'd1;
            lit_n = 1'b1;
          end
        end else begin
          if (lit_n) begin
            e0[ti*8 +: 8] = bx;
            ecnt[ti*2 +: 2] = 2'd1;
          end
          rem_n = rem_n - 8'd1;
        end
      end

    // compaction: output byte o is e0/e1 of the position whose offset covers it
    ec = {(NBW+1){1'b0}};
    eoff = {EMAX*8{1'b0}};
    for (ti = 0; ti < EMAX; ti = ti + 1) begin
      eoff[ti*8 +: 8] = ec;
      ec = ec + ecnt[ti*2 +: 2];
    end
    ebuf = {BB*8{1'b0}};
    for (to = 0; to < BB; to = to + 1)
      for (ti = 0; ti < EMAX; ti = ti + 1)
        if (2 * ti + 1 >= to) begin
          if (ecnt[ti*2 +: 2] != 2'd0 && eoff[ti*8 +: 8] == to) ebuf[to*8 +: 8] = e0[ti*8 +: 8];
          if (ecnt[ti*2 +: 2] == 2'd2 && eoff[ti*8 +: 8] + 8'd1 == to) ebuf[to*8 +: 8] = e1[ti*8 +: 8];
        end
  end

  // packer: append ebuf at fill
  reg [2*BB*8-1:0] pk_tmp;
  reg [NBW+1:0]    pk_nf;
  always @(*) begin
    pk_tmp = acc | ({{(BB*8){1'b0}}, ebuf} << (fill * 8));
    pk_nf = fill + ec;
  end

  wire comp_proc = (st == S_COMP) && (nshift >= {8'd0, dwin}) && (pbase < n_el);

  // ---------------------------------------------------------------- EMIT
  reg [191:0]      hdr;
  reg [31:0]       rlen;      // record bytes
  reg [AW+1:0]     np;        // payload words
  reg [31:0]       nw;        // record words
  reg [AW+1:0]     ri;        // next payload word to read
  reg              infl;      // a read was issued last cycle
  reg [DW*FD-1:0]  fifo;
  reg [1:0]        fh, ft;
  reg [2:0]        fcnt;
  reg [DW-1:0]     prevw;
  reg [31:0]       ow;        // next record word to send
  reg [31:0]       cbase;     // CRC register of the chosen payload (from 0)
  reg [31:0]       pw, kk;    // x^(8*len) accumulation, x^(8*2^i)
  reg [7:0]        ci;
  reg [31:0]       plsel;

  wire [DW-1:0] src_rd = e_raw ? pr_rd : pl_rd;
  wire          em_need = (ow < {{(32-AW-2){1'b0}}, np});
  wire          em_can = (sb == B_EMIT) && (ow < nw) && (!out_valid || out_ready) &&
                         (!em_need || fcnt != 3'd0);
  wire          em_issue = (sb == B_EMIT) && (ri < np) && ({1'b0, fcnt} + {3'd0, infl} < FD - 1);
  wire [DW-1:0] fifo_head = fifo[fh*DW +: DW];

  reg [DW-1:0] em_word;
  reg [31:0]   em_g;
  integer      ei;
  always @(*) begin
    em_word = {DW{1'b0}};
    ei = 0;
    em_g = 32'd0;
    for (ei = 0; ei < BB; ei = ei + 1) begin
      em_g = ow * BB + ei;
      if (em_g < rlen) begin
        if (ei < 24)
          em_word[ei*8 +: 8] = (ow == 32'd0) ? hdr[ei*8 +: 8] : prevw[(ei + BB - 24)*8 +: 8];
        else if (em_need)
          em_word[ei*8 +: 8] = fifo_head[(ei - 24)*8 +: 8];
      end
    end
  end

  // header CRC: register after bytes 0..19 of the header
  wire [31:0] hdr_crc = ~(gf_mul(crc_upd(32'hFFFFFFFF, {{(BB*8-160){1'b0}}, hdr[159:0]}, 8'd20), pw) ^ cbase);

  // ---------------------------------------------------------------- RAM port control
  always @(*) begin
    pg_we = in_fire;
    pg_wa = {fbank, f_nbeats[AW-1:0]};
    pg_re = 1'b0;
    pg_ra = {(AW+2){1'b0}};
    pr_re = 1'b0;
    pr_ra = {(AW+2){1'b0}};
    pl_re = 1'b0;
    pl_ra = {(AW+1){1'b0}};
    if (st == S_COMP && rk < nbeats) begin
      pg_re = 1'b1;
      pg_ra = {mbank, rk[AW-1:0]};
    end
    if (em_issue) begin
      if (e_raw) begin pr_re = 1'b1; pr_ra = {ebank, ri[AW-1:0]}; end
      else begin pl_re = 1'b1; pl_ra = {pbb, ri[AW-1:0]}; end
    end
  end

  // ---------------------------------------------------------------- sequential
  always @(posedge clk) begin
    pl_we <= 1'b0;
    if (rst) begin
      st <= S_IDLE;
      f_first <= 1'b1;
      f_full <= 1'b0;
      f_tot <= 32'd0;
      f_nbeats <= {(AW+1){1'b0}};
      sb <= B_IDLE;
      fbank <= 2'd0;
      mbank <= 2'd0;
      ebank <= 2'd0;
      pmb <= 1'b0;
      pbb <= 1'b0;
      out_valid <= 1'b0;
      out_last <= 1'b0;
      out_data <= {DW{1'b0}};
      out_nbytes <= {NBW{1'b0}};
      infl <= 1'b0;
      fcnt <= 3'd0;
      fh <= 2'd0;
      ft <= 2'd0;
    end else begin
      case (st)
        S_IDLE: if (handoff) begin
          mode_r <= f_mode;
          dtype_r <= f_dtype;
          ch_r <= f_ch;
          tot <= f_tot;
          nbeats <= f_nbeats;
          amax <= f_amax;
          nonfin <= f_nonfin;
          craw <= f_craw;
          mbank <= fbank;
          st <= S_PREP;
        end

        S_PREP: begin
          n_el <= pr_n;
          lay_c <= (ch_r != 16'd0 && (pr_n % {16'd0, ch_r}) == 32'd0) ? ch_r : 16'd1;
          use_delta <= (mode_r == 8'd1);
          use_rle <= (mode_r == 8'd1);
          ebeat <= (dtype_r == 8'd3) ? EMAX / 2 : EMAX;
          dwin <= (dtype_r == 8'd3) ? (2 * WS) / EMAX : WS / EMAX;
          if (amax < 32'h00800000) begin
            scale_f <= 16'd0; scale_es <= 8'd0; scale_r <= 16'd0;
          end else begin
            scale_f <= {1'b0, pr_em - pr_j, pr_ms[6:0]};
            scale_es <= pr_em - pr_j;
            scale_r <= pr_r[15:0];
          end
          is_raw <= (mode_r != 8'd1 && mode_r != 8'd2) || dtype_r == 8'd0 || nonfin || pr_range_bad;
          if ((mode_r != 8'd1 && mode_r != 8'd2) || dtype_r == 8'd0 || nonfin || pr_range_bad)
            st <= S_FIN;
          else
            st <= S_COMP;
          // packer starts with the scale field (§8: payload = scales, then the stream)
          acc <= {{(2*BB*8-16){1'b0}},
                  (amax < 32'h00800000) ? 16'd0 : {1'b0, pr_em - pr_j, pr_ms[6:0]}};
          fill <= 2;
          plen <= 32'd2;
          pwa <= {(AW+1){1'b0}};
          ccmp <= 32'd0;
          rk <= {(AW+1){1'b0}};
          v1 <= 1'b0;
          prev_q <= 8'd0;
          nshift <= 16'd0;
          pbase <= 32'd0;
          rem <= 8'd0;
          lit <= 1'b0;
        end

        S_COMP: begin
          if (rk < nbeats) rk <= rk + 1'b1;
          v1 <= (rk < nbeats);
          // shift a beat of d-bytes in at the top (every cycle after the first)
          if (v1 || rk != {(AW+1){1'b0}}) begin
            nshift <= nshift + 16'd1;
            if (ebeat == EMAX) win <= {qd, win[WS*8-1:EMAX*8]};
            else win <= {qd[EMAX*4-1:0], win[WS*8-1:EMAX*4]};
            if (v1) prev_q <= qd_last;
          end
          if (comp_proc) begin
            rem <= rem_n;
            lit <= lit_n;
            pbase <= pbase + ebeat;
            plen <= plen + ec;
            if (pk_nf >= BB) begin
              if (pwa < PD) begin
                pl_we <= 1'b1;
                pl_wa <= {pmb, pwa[AW-1:0]};
                pl_wd <= pk_tmp[BB*8-1:0];
                pwa <= pwa + 1'b1;
              end
              ccmp <= crc_upd(ccmp, pk_tmp[BB*8-1:0], BB);
              acc <= pk_tmp >> (BB * 8);
              fill <= pk_nf - BB;
            end else begin
              acc <= pk_tmp;
              fill <= pk_nf[NBW:0];
            end
            if (pbase + ebeat >= n_el) st <= S_FLUSH;
          end
        end

        S_FLUSH: begin
          if (fill != 0) begin
            if (pwa < PD) begin
              pl_we <= 1'b1;
              pl_wa <= {pmb, pwa[AW-1:0]};
              pl_wd <= acc[BB*8-1:0];
            end
            ccmp <= crc_upd(ccmp, acc[BB*8-1:0], fill);
          end
          st <= S_FIN;
        end

        S_FIN: if (sb == B_IDLE) begin
          // §7: bypass when the quantised record is not shorter than the raw one;
          // hand the record over to the back stage
          if (is_raw || plen >= tot) begin
            e_raw <= 1'b1;
            plsel <= tot;
            cbase <= craw;
            hdr <= {32'd0, tot, 16'd0, 16'd1, n_el, 8'd0, 8'd0, 8'd0, dtype_r, 8'd0, 8'd1, 16'h4B53};
          end else begin
            e_raw <= 1'b0;
            plsel <= plen;
            cbase <= ccmp;
            hdr <= {32'd0, plen, 16'd0, lay_c, n_el, (mode_r == 8'd1) ? 8'h05 : 8'h00, 8'd0, 8'd8,
                    dtype_r, mode_r, 8'd1, 16'h4B53};
          end
          pw <= 32'h80000000;
          kk <= 32'h00800000;
          ci <= 8'd0;
          ebank <= mbank;
          pbb <= pmb;
          pmb <= ~pmb;
          sb <= B_CRC;
          st <= S_IDLE;
        end

        default: st <= S_IDLE;
      endcase

      case (sb)
        B_IDLE: ;  // S_FIN hands a record over

        B_CRC: begin
          if (plsel[ci]) pw <= gf_mul(pw, kk);
          kk <= gf_mul(kk, kk);
          ci <= ci + 8'd1;
          if (ci == LB - 1) sb <= B_HDR;
        end

        B_HDR: begin
          hdr[191:160] <= hdr_crc;
          rlen <= plsel + 32'd24;
          nw <= (plsel + 32'd24 + BB - 1) / BB;
          np <= (plsel + BB - 1) / BB;
          ri <= {(AW+2){1'b0}};
          ow <= 32'd0;
          infl <= 1'b0;
          fcnt <= 3'd0;
          fh <= 2'd0;
          ft <= 2'd0;
          sb <= B_EMIT;
        end

        B_EMIT: begin
          if (out_valid && out_ready) out_valid <= 1'b0;
          infl <= em_issue;
          if (em_issue) ri <= ri + 1'b1;
          if (infl) begin
            fifo[ft*DW +: DW] <= src_rd;
            ft <= ft + 2'd1;
          end
          if (em_can) begin
            out_valid <= 1'b1;
            out_data <= em_word;
            out_last <= (ow + 32'd1 == nw);
            out_nbytes <= (ow + 32'd1 == nw) ? (rlen - ow * BB) : BB;
            ow <= ow + 32'd1;
            if (em_need) begin
              prevw <= fifo_head;
              fh <= fh + 2'd1;
            end
          end
          fcnt <= fcnt + {2'd0, infl} - {2'd0, em_can && em_need};
          if (out_valid && out_ready && out_last) begin
            out_last <= 1'b0;
            sb <= B_IDLE;
          end
        end

        default: ;
      endcase

      // front end: LOAD (one beat per cycle), hand-over to the back end
      if (in_fire) begin
        if (f_first) begin
          f_mode <= cfg_mode;
          f_dtype <= cfg_dtype;
          f_ch <= cfg_channels;
        end
        f_first <= 1'b0;
        f_nbeats <= f_nbeats + 1'b1;
        f_tot <= f_tot + in_nbytes;
        if (ld_max > f_amax || f_first) f_amax <= ld_max;
        f_nonfin <= (f_first ? 1'b0 : f_nonfin) | ld_nonfin;
        f_craw <= crc_upd(f_first ? 32'd0 : f_craw, in_data, in_nbytes);
        if (in_last) f_full <= 1'b1;
      end
      if (handoff) begin
        f_full <= 1'b0;
        f_first <= 1'b1;
        f_tot <= 32'd0;
        f_nbeats <= {(AW+1){1'b0}};
        fbank <= (fbank == 2'd2) ? 2'd0 : fbank + 2'd1;
      end
    end
  end
endmodule
`default_nettype wire
