// SPDX-License-Identifier: Apache-2.0
// speckv KV codec: page encoder (docs/codec.md §1-§9, §16, §18).
//
// Implements record modes 0 (raw), 1 (paper: b=8, page scale, linear
// delta, RLE), 2 (int8: b=8, page scale, no delta, bytes), 15/16/17
// (vp8/vp6/vp5: b=8/6/5, page scale, no delta, Rice of §6.2) and 30/31/32
// (vp8s/vp6s/vp5s: the same with split Rice of §18), with the bypass rule
// of §7, for dtypes 0..3. A page arrives as DW-bit beats (in_nbytes valid
// bytes per beat, BB on every beat but the last; in_last on the last).
// cfg_* are sampled with the first beat of a page. The record leaves as
// DW-bit beats of record bytes, out_nbytes valid, out_last on the last one.
// Any other known cfg_mode (3..14, 18..29: channel/token scales, delta with
// Rice or split Rice, b > 8) is not implemented here and is stored raw.
//
// Preconditions (the C++ encode() returns SPECKV_EINVAL for these):
// 1 <= page bytes <= MAX_BYTES, a whole number of elements, a known mode id.
//
// A pipeline of stages that each hold a different page, in order (see
// fpga/README.md for the figure and the cycle counts):
//   LOAD  page RAM write, max |x|, non-finite, CRC of the raw bytes; II=1.
//   READ  takes a loaded page (scale and reciprocal computed on the way in),
//         reads it back one beat per cycle; the first beat of page k+1 is
//         read the cycle after the last beat of page k.
//   QUANT quantise + delta into the RLE window, a delay line of D beats
//         (D = WS/E) that shifts every cycle; page k+1's beats follow page k's
//         in it, so the look-ahead of page k's tail overlaps page k+1's fill.
//   COMP  RLE tokens or Rice codes + packer on the window's oldest beat, one
//         beat per cycle, never stalls; positions are page-relative, so bytes
//         of the next page in the look-ahead are masked like bytes past the
//         end. Rice: a block's k (argmin of the 8 block costs) is computed
//         from the 64 window slots of the block when its first symbol is in
//         the oldest beat; a beat's codes (up to 1.5 DW bits) go to a bit
//         packer that writes up to two payload words per cycle. Split
//         Rice: the same k; the codes' parts go to four section packers
//         (K, Low, Unary = the payload packer, Escape), each to its RAM.
//   FIN   last payload word, its CRC, the bypass decision (§7), the header.
//   HCRC  header CRC: each part's CRC register from 0 advanced over the
//         bytes after it (x^(8·len), square-and-multiply, LB cycles) and
//         XORed, overlapped with the previous record's EMIT.
//   EMIT  header (+ scale), then the record's RAM sections (K, Low,
//         Unary / payload / raw page, Escape) through a byte realigner, II=1.
// Stages never stall each other mid-page: a page enters LOAD only when fewer
// than NPG pages are between LOAD and the end of EMIT, which bounds every
// queue and RAM bank below. Output back-pressure backs up to in_ready.
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
  localparam integer CH = EMAX / 2;               // window chunk: d-bytes of half a beat (FP32: a beat)
  // RLE look-ahead window: a block of E bytes plus the 130 bytes a token can see.
  localparam integer WS = EMAX * ((EMAX + 130 + EMAX - 1) / EMAX);
  localparam integer NCH = WS / CH;               // window chunks
  localparam integer PD = MAX_BYTES / BB;         // page RAM / payload RAM words per bank
  localparam integer AW = (PD > 1) ? $clog2(PD) : 1;
  localparam integer LB = $clog2(MAX_BYTES + 1);  // bits of a payload length
  localparam integer FD = 4;                      // EMIT prefetch FIFO depth
  localparam [2:0] NPG = 3'd4;                    // pages in flight = page RAM / payload banks

  `include "speckv_codec_fn.vh"

  // ================================================================ LOAD
  reg         f_first;                 // next input beat starts a page
  reg  [1:0]  fbank;                   // bank being loaded (page k -> bank k mod 4)
  reg  [7:0]  f_mode, f_dtype;
  reg  [15:0] f_ch;
  reg  [31:0] f_tot, f_amax, f_craw;
  reg  [AW:0] f_nbeats;
  reg         f_nonfin;
  // the loaded page, waiting for READ
  reg         d_full;
  reg  [1:0]  d_bank;
  reg  [7:0]  d_mode, d_dtype;
  reg  [15:0] d_ch;
  reg  [31:0] d_tot, d_amax, d_craw;
  reg  [AW:0] d_nbeats;
  reg         d_nonfin;
  reg  [2:0]  alive;                   // pages between LOAD (first beat) and the end of EMIT
  // quantiser bits of the loaded page's mode (§9, §16, §18): 6 vp6/vp6s, 5 vp5/vp5s, else 8
  wire [3:0]  d_bits = (d_mode == 8'd16 || d_mode == 8'd31) ? 4'd6 :
                       (d_mode == 8'd17 || d_mode == 8'd32) ? 4'd5 : 4'd8;
  wire [7:0]  d_qmax = (8'd1 << (d_bits - 4'd1)) - 8'd1;

  wire        r_take;                  // READ takes the loaded page this cycle
  wire        e_done;                  // EMIT's last beat is accepted this cycle
  assign in_ready = (!d_full || r_take) && (!f_first || alive < NPG);
  wire        in_fire = in_valid && in_ready;
  wire [7:0]  dt_now = f_first ? cfg_dtype : f_dtype;

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
  // running values including this beat
  wire [31:0] ln_tot = (f_first ? 32'd0 : f_tot) + {{(32-NBW){1'b0}}, in_nbytes};
  wire [AW:0] ln_nb = (f_first ? {(AW+1){1'b0}} : f_nbeats) + 1'b1;
  wire [31:0] ln_amax = (f_first || ld_max > f_amax) ? ld_max : f_amax;
  wire        ln_nonfin = (f_first ? 1'b0 : f_nonfin) | ld_nonfin;
  wire [31:0] ln_craw = crc_upd(f_first ? 32'd0 : f_craw, in_data, in_nbytes);

  // ================================================================ READ: take a page, scale (§3.2, §3.3)
  reg [15:0] pr_mm;
  reg [7:0]  pr_em;
  reg [31:0] pr_ms1, pr_ms, pr_div;
  reg [7:0]  pr_j, pr_l;
  reg [31:0] pr_n;
  reg        pr_range_bad;
  reg [31:0] pr_r;
  always @(*) begin
    pr_em = d_amax[30:23];
    pr_mm = {1'b1, d_amax[22:8]};
    // §3.2 with L = b - 1, Q = 2^L - 1: Ms = ceil(Mm·2^j / (256·Q)), j = L, or L - 1 if Ms >= 256
    pr_l = {4'd0, d_bits} - 8'd1;
    pr_div = {16'd0, d_qmax, 8'd0};
    pr_ms1 = (({16'd0, pr_mm} << pr_l) + pr_div - 32'd1) / pr_div;
    if (pr_ms1 >= 32'd256) begin
      pr_j = pr_l - 8'd1;
      pr_ms = (({16'd0, pr_mm} << pr_j) + pr_div - 32'd1) / pr_div;
    end else begin
      pr_j = pr_l;
      pr_ms = pr_ms1;
    end
    pr_range_bad = (d_amax >= 32'h00800000) && (pr_em < 8'd27 || pr_em > 8'd226);
    pr_r = 32'h7FFFFF / ((pr_ms == 32'd0) ? 32'd1 : pr_ms);
    case (d_dtype)
      8'd3:    pr_n = d_tot >> 2;
      8'd0:    pr_n = d_tot;
      default: pr_n = d_tot >> 1;
    endcase
  end
  wire        d_zero = d_amax < 32'h00800000;                    // all q = 0, scale field 0
  wire [15:0] d_scale = d_zero ? 16'd0 : {1'b0, pr_em - pr_j, pr_ms[6:0]};
  wire [7:0]  d_es = d_zero ? 8'd0 : pr_em - pr_j;
  wire [15:0] d_rr = d_zero ? 16'd0 : pr_r[15:0];
  // Rice (vp8/vp6/vp5) and split Rice (vp8s/vp6s/vp5s): the window holds q itself (no delta)
  wire        d_rice = (d_mode == 8'd15 || d_mode == 8'd16 || d_mode == 8'd17 ||
                        d_mode == 8'd30 || d_mode == 8'd31 || d_mode == 8'd32);
  wire        d_raw = (d_mode != 8'd1 && d_mode != 8'd2 && !d_rice) || d_dtype == 8'd0 || d_nonfin || pr_range_bad;
  wire        d_e32 = (d_dtype == 8'd3);
  wire [15:0] d_layc = (d_ch != 16'd0 && (pr_n % {16'd0, d_ch}) == 32'd0) ? d_ch : 16'd1;

  reg         r_act;                   // issuing reads of a page (a raw page issues one marker)
  reg  [AW:0] r_rk, r_nb;
  reg  [1:0]  r_bank;
  reg         r_mark, r_delta;
  reg  [7:0]  r_dtype, r_es, r_qmax;
  reg  [15:0] r_rr;
  reg  [1:0]  ccnt;                    // pages taken by READ and not yet finished by COMP (<= 2)
  reg         w_e32;                   // window geometry: 1 = FP32 (E = BB/4 per beat)
  wire        r_free = !r_act || (r_rk + 1'b1 >= r_nb);
  // a page of the other geometry waits until the window is empty (ccnt = 0)
  assign r_take = d_full && r_free && ccnt != 2'd2 && (d_raw || d_e32 == w_e32 || ccnt == 2'd0);

  // ================================================================ per-page queue READ -> COMP (2 entries)
  // {tot, craw, n_el, lay_c, scale, mode, dtype, bank, raw, rle, e32}
  localparam integer CQW = 32 + 32 + 32 + 16 + 16 + 8 + 8 + 2 + 3;
  wire [CQW-1:0] cq_in = {d_tot, d_craw, pr_n, d_layc, d_scale, d_mode, d_dtype, d_bank,
                          d_raw, d_mode == 8'd1, d_e32};
  reg  [CQW-1:0] cq0, cq1;
  reg            cq_wp, cq_rp;
  wire [CQW-1:0] cqh = cq_rp ? cq1 : cq0;
  wire [31:0]    c_tot = cqh[CQW-1 -: 32];
  wire [31:0]    c_craw = cqh[CQW-33 -: 32];
  wire [31:0]    c_n = cqh[CQW-65 -: 32];
  wire [15:0]    c_layc = cqh[CQW-97 -: 16];
  wire [15:0]    c_scale = cqh[CQW-113 -: 16];
  wire [7:0]     c_mode = cqh[CQW-129 -: 8];
  wire [7:0]     c_dtype = cqh[CQW-137 -: 8];
  wire [1:0]     c_bank = cqh[4:3];
  wire           c_rle = cqh[1];
  wire           c_e32 = cqh[0];

  // ================================================================ RAMs
  // page RAM: 4 banks, two copies (one read port for READ, one for EMIT of a raw record)
  wire          pg_we = in_fire;
  wire [AW+1:0] pg_wa = {fbank, f_first ? {AW{1'b0}} : f_nbeats[AW-1:0]};
  wire          pg_re = r_act && !r_mark;
  wire [AW+1:0] pg_ra = {r_bank, r_rk[AW-1:0]};
  reg           pr_re;
  reg  [AW+1:0] pr_ra;
  wire [DW-1:0] pg_rd, pr_rd;
  speckv_sdp_ram #(.W(DW), .D(4 << AW), .AW(AW + 2)) u_page (
    .clk(clk), .we(pg_we), .wa(pg_wa), .wd(in_data), .re(pg_re), .ra(pg_ra), .rd(pg_rd));
  speckv_sdp_ram #(.W(DW), .D(4 << AW), .AW(AW + 2)) u_page_b (
    .clk(clk), .we(pg_we), .wa(pg_wa), .wd(in_data), .re(pr_re), .ra(pr_ra), .rd(pr_rd));

  // payload RAM: 4 banks in four instances, by bank parity and by word parity:
  // FIN (page k) and COMP (page k+1, the other bank parity) can write in the
  // same cycle, and COMP can write two consecutive words (both parities) in
  // one cycle (a beat of Rice codes can fill more than one word).
  // (both write ports are registered: COMP's words of page k and FIN's last
  // word of page k reach the RAM one and two cycles after COMP's last beat of
  // page k, when COMP writes page k+1 at the earliest, of the other parity)
  localparam integer PH = (PD + 1) / 2;           // words of one parity per bank
  localparam integer AH = (PH > 1) ? $clog2(PH) : 1;
  reg           c_we, fn_we;
  reg  [1:0]    c_nw;                  // words COMP writes (1 or 2) at c_wa, c_wa + 1
  reg  [AW:0]   c_wa, fn_wa;
  reg  [DW-1:0] c_wd0, c_wd1, fn_wd;
  reg  [1:0]    c_wb, fn_wb, fn_bank;
  reg           pl_re, pl_par, e_par;
  reg  [AH-1:0] pl_ra;
  reg  [1:0]    e_bank;
  wire [AW:0]   c_wa1 = c_wa + 1'b1;
  wire          c_ok0 = c_we && c_wa < PD;             // words past the page size are not kept: bypass
  wire          c_ok1 = c_we && c_nw == 2'd2 && c_wa1 < PD;
  wire [4*DW-1:0] pl_rdv;
  genvar        gi;
  generate
    for (gi = 0; gi < 4; gi = gi + 1) begin : g_pay
      // instance gi: bank parity gi % 2, word parity gi / 2
      wire          cw0 = c_ok0 && c_wb[0] == (gi % 2) && c_wa[0] == (gi / 2);
      wire          cw1 = c_ok1 && c_wb[0] == (gi % 2) && c_wa1[0] == (gi / 2);
      wire          fw = fn_we && fn_wb[0] == (gi % 2) && fn_wa[0] == (gi / 2);
      wire [AW:0]   cwa = cw1 ? c_wa1 : c_wa;
      wire [AW:0]   wa_w = fw ? fn_wa : cwa;
      wire [AW:0]   wa_h = wa_w >> 1;
      speckv_sdp_ram #(.W(DW), .D(2 << AH), .AW(AH + 1)) u_pay (
        .clk(clk), .we(cw0 || cw1 || fw),
        .wa({fw ? fn_wb[1] : c_wb[1], wa_h[AH-1:0]}),
        .wd(fw ? fn_wd : cw1 ? c_wd1 : c_wd0),
        .re(pl_re && e_bank[0] == (gi % 2) && pl_par == (gi / 2)), .ra({e_bank[1], pl_ra}),
        .rd(pl_rdv[gi*DW +: DW]));
    end
  endgenerate

  // ================================================================ QUANT: quantise + delta (beat in pg_rd)
  reg         q_v, q_mark, q_first, q_delta;
  reg  [7:0]  q_dtype, q_es, q_qmax;
  reg  [15:0] q_rr;
  reg  [7:0]  prev_q;                  // q of the last element of the previous beat

  reg [EMAX*8-1:0] qd;                 // d-bytes of the beat in pg_rd
  reg [7:0]        qd_last;            // q of the beat's last element
  reg [7:0]        qq, qp;
  integer          qi;
  always @(*) begin
    qd = {EMAX*8{1'b0}};
    qi = 0;
    qp = q_first ? 8'd0 : prev_q;
    qq = 8'd0;
    if (q_dtype == 8'd3) begin
      for (qi = 0; qi < BB / 4; qi = qi + 1) begin
        qq = quant_one(pg_rd[qi*32 +: 32], q_es, q_rr, q_qmax);
        qd[qi*8 +: 8] = q_delta ? (qq - qp) : qq;
        qp = qq;
      end
    end else begin
      for (qi = 0; qi < EMAX; qi = qi + 1) begin
        qq = quant_one(canon_elem(q_dtype, {16'd0, pg_rd[qi*16 +: 16]}), q_es, q_rr, q_qmax);
        qd[qi*8 +: 8] = q_delta ? (qq - qp) : qq;
        qp = qq;
      end
    end
    qd_last = qp;
  end

  // window: slot 0 oldest; per chunk a valid bit and a marker bit (the one beat of a raw page)
  reg  [WS*8-1:0] win;
  reg  [NCH-1:0]  wv, wm;

  // ================================================================ COMP: RLE tokens (§6.1) or Rice (§6.2) + packer
  reg  [31:0]       pbase;             // page position of window slot 0
  reg  [7:0]        rem;               // positions left in the current RLE token
  reg               lit;               // the current token is a literal
  reg  [DW-1:0]     acc;               // packer: fill (< DW) bits of the next payload word
  reg  [12:0]       fill;              // bits in acc
  reg  [AW:0]       pwa;
  reg  [31:0]       ccmp;              // CRC register from 0 over the payload
  reg  [31:0]       plen;              // payload bits so far (scale field included)
  reg  [2:0]        rk;                // Rice: k of the current block

  wire [7:0] ebeat = c_e32 ? CH : EMAX;
  wire       c_go = wv[0];             // slot 0 holds a beat of the head page: it is processed now
  wire       c_mark = wm[0];
  wire       c_end = c_go && (c_mark || pbase + ebeat >= c_n);

  // er[x]: equal bytes from slot x (capped at 130); litl[x]: length of a literal
  // starting at x (next slot that starts a run of >= 3 or is past n, capped at 128).
  reg [WS*8-1:0]   er, litl;
  reg [BB*8-1:0]   ebuf;               // token bytes produced this cycle, compacted
  reg [NBW:0]      ec;
  reg [EMAX*2-1:0] ecnt;               // bytes produced at each position (0..2)
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
      vx = (pbase + ti) < c_n;
      vx1 = (ti + 1 < WS) && ((pbase + ti + 1) < c_n);
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
      if (ti < ebeat && (pbase + ti) < c_n) begin
        bx = win[ti*8 +: 8];
        erx = er[ti*8 +: 8];
        if (!c_rle) begin
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

  // Rice codes of the oldest beat (§6.2; no delta: z = zigzag(q), q in the window).
  // A block of 64 symbols starts at most once per beat (E <= 64), at slot rc_s;
  // its k is the argmin (ties to the smallest) of the 8 block costs over
  // window slots rc_s .. rc_s + 63 (WS >= E + 130 > rc_s + 63).
  // split Rice (§18, vp8s/vp6s/vp5s): the same symbols and block k (its escape
  // costs one bit more), the code parts go to four sections (see below)
  wire       c_split = (c_mode == 8'd30 || c_mode == 8'd31 || c_mode == 8'd32);
  wire       c_rice = (c_mode == 8'd15 || c_mode == 8'd16 || c_mode == 8'd17) || c_split;
  wire [4:0] c_w = (c_mode == 8'd16 || c_mode == 8'd31) ? 5'd7 :
                   (c_mode == 8'd17 || c_mode == 8'd32) ? 5'd6 : 5'd9;   // escape width b + 1
  wire [11:0] c_esc = {7'd0, c_w} + (c_split ? 12'd16 : 12'd15);       // bit cost of an escape
  reg [2*DW-1:0]   rc_bits;            // this beat's codes, LSB first
  reg [11:0]       rc_n;               // their bit count (<= E * 24 + 3)
  reg [8*12-1:0]   rc_cost;
  reg [11:0]       rc_ck;
  reg [2:0]        rc_k, rc_kb;
  reg [7:0]        rc_s;
  reg [8:0]        rc_z, rc_u;
  reg [4:0]        rc_l;
  reg [23:0]       rc_code;
  reg              rc_blk;
  integer          ri_, rk_;
  always @(*) begin
    rc_bits = {2*DW{1'b0}};
    rc_n = 12'd0;
    rc_cost = {8*12{1'b0}};
    rc_ck = 12'd0;
    rc_k = rk;
    rc_kb = 3'd0;
    rc_s = (8'd64 - {2'd0, pbase[5:0]}) & 8'd63;
    rc_z = 9'd0;
    rc_u = 9'd0;
    rc_l = 5'd0;
    rc_code = 24'd0;
    rc_blk = 1'b0;
    ri_ = 0;
    rk_ = 0;
    if (c_rice && c_go && !c_mark) begin
      rc_blk = (rc_s < ebeat) && (pbase + rc_s < c_n);
      if (rc_blk) begin
        for (ri_ = 0; ri_ < 64; ri_ = ri_ + 1)
          if (pbase + rc_s + ri_ < c_n) begin
            rc_z = {win[(rc_s + ri_)*8 +: 8], 1'b0} ^ {9{win[(rc_s + ri_)*8 + 7]}};
            for (rk_ = 0; rk_ < 8; rk_ = rk_ + 1) begin
              rc_u = rc_z >> rk_;
              rc_cost[rk_*12 +: 12] = rc_cost[rk_*12 +: 12] +
                  ((rc_u < 9'd15) ? {3'd0, rc_u} + 12'd1 + rk_ : c_esc);
            end
          end
        rc_ck = rc_cost[11:0];
        for (rk_ = 1; rk_ < 8; rk_ = rk_ + 1)
          if (rc_cost[rk_*12 +: 12] < rc_ck) begin
            rc_ck = rc_cost[rk_*12 +: 12];
            rc_kb = rk_;
          end
      end
      for (ri_ = 0; ri_ < EMAX; ri_ = ri_ + 1)
        if (ri_ < ebeat && (pbase + ri_) < c_n) begin
          if (rc_blk && ri_ == rc_s) begin
            rc_bits[rc_n +: 3] = rc_kb;
            rc_n = rc_n + 12'd3;
            rc_k = rc_kb;
          end
          rc_z = {win[ri_*8 +: 8], 1'b0} ^ {9{win[ri_*8 + 7]}};
          rc_u = rc_z >> rc_k;
          if (rc_u < 9'd15) begin
            // u one-bits, a zero-bit, the k low bits of z
            rc_code = ((24'd1 << rc_u) - 24'd1) | (({15'd0, rc_z} & ((24'd1 << rc_k) - 24'd1)) << (rc_u + 9'd1));
            rc_l = rc_u[4:0] + 5'd1 + {2'd0, rc_k};
          end else begin
            // escape: 15 one-bits, z in W bits
            rc_code = 24'h7FFF | ({15'd0, rc_z} << 15);
            rc_l = 5'd15 + c_w;
          end
          rc_bits[rc_n +: 24] = rc_code;
          rc_n = rc_n + {7'd0, rc_l};
        end
    end
  end

  // Split Rice codes of the oldest beat (§18): position i of the beat, with
  // its block's k (the new block's from slot rc_s on), gives k low bits of z
  // (section Low), v = min(z >> k, 15) zero-bits and a one-bit (Unary) and,
  // when z >> k >= 15, z >> k in W - k bits (Escape); a block start gives
  // its 4-bit k (section K). Each section has its own bit packer; Unary uses
  // the payload packer below, the others speckv_enc_sec. The offsets are
  // running sums over the positions, like rc_n.
  localparam integer SLW = EMAX * 7;              // most Low bits per beat
  localparam integer SEW = EMAX * 9;              // most Escape bits per beat (W - k <= 9)
  reg [SLW+6:0]    sl_bits;
  reg [DW+15:0]    su_bits;            // <= 16 bits per position: EMAX * 16 = DW
  reg [SEW+8:0]    se_bits;
  reg [12:0]       sl_n, su_n, se_n;
  reg [2:0]        sp_k;
  reg [8:0]        sp_z, sp_u;
  reg [3:0]        sp_v;
  integer          si_;
  always @(*) begin
    sl_bits = {(SLW+7){1'b0}};
    su_bits = {(DW+16){1'b0}};
    se_bits = {(SEW+9){1'b0}};
    sl_n = 13'd0;
    su_n = 13'd0;
    se_n = 13'd0;
    sp_k = rk;
    sp_z = 9'd0;
    sp_u = 9'd0;
    sp_v = 4'd0;
    si_ = 0;
    if (c_split && c_go && !c_mark)
      for (si_ = 0; si_ < EMAX; si_ = si_ + 1)
        if (si_ < ebeat && (pbase + si_) < c_n) begin
          sp_k = (rc_blk && si_ >= rc_s) ? rc_kb : rk;
          sp_z = {win[si_*8 +: 8], 1'b0} ^ {9{win[si_*8 + 7]}};
          sp_u = sp_z >> sp_k;
          sp_v = (sp_u < 9'd15) ? sp_u[3:0] : 4'd15;
          // fields are placed in increasing order: each overwrites the zero tail of the previous one
          sl_bits[sl_n +: 7] = sp_z[6:0] & ((7'd1 << sp_k) - 7'd1);
          sl_n = sl_n + {10'd0, sp_k};
          su_bits[su_n +: 16] = 16'd1 << sp_v;
          su_n = su_n + {9'd0, sp_v} + 13'd1;
          if (sp_u >= 9'd15) begin
            se_bits[se_n +: 9] = sp_u;
            se_n = se_n + {8'd0, c_w} - {10'd0, sp_k};
          end
        end
  end

  // packer (bits): append this beat's RLE bytes or Rice codes at fill; a
  // page's packer starts with its scale field (§8: payload = scales, then the
  // stream), put in at its first beat. Up to two payload words per cycle.
  // Split Rice: the packer takes the Unary section and starts empty (the
  // scale goes out with the header, the K and Low sections precede Unary).
  wire             pk_sp0 = c_split && pbase == 32'd0;    // first beat of a split page
  wire [12:0]      fill_e = pk_sp0 ? 13'd0 : fill;
  wire [31:0]      plen_e = pk_sp0 ? 32'd0 : plen;
  reg [3*DW-1:0]   pk_tmp, pk_acc, pk_sh;
  reg [2*DW-1:0]   pk_in;
  reg [12:0]       pk_nin, pk_nf;
  reg [1:0]        pk_nw;              // whole payload words ready (0..2)
  reg [DW-1:0]     pk_accn;            // packer after this cycle
  reg [12:0]       pk_filln;
  reg [31:0]       pk_ccmpn;
  always @(*) begin
    pk_acc = {{(2*DW){1'b0}}, acc[DW-1:16], (pbase == 32'd0) ? (c_split ? 16'd0 : c_scale) : acc[15:0]};
    pk_in = c_split ? {{(DW-16){1'b0}}, su_bits} : c_rice ? rc_bits : {{DW{1'b0}}, ebuf};
    pk_nin = c_split ? su_n : c_rice ? {1'b0, rc_n} : {{(9-NBW){1'b0}}, ec, 3'b000};
    pk_tmp = pk_acc | ({{DW{1'b0}}, pk_in} << fill_e);
    pk_nf = fill_e + pk_nin;
    pk_nw = (pk_nf >= 2 * DW) ? 2'd2 : (pk_nf >= DW) ? 2'd1 : 2'd0;
    pk_sh = pk_tmp >> (pk_nw * DW);
    pk_accn = pk_sh[DW-1:0];
    pk_filln = pk_nf - pk_nw * DW;
    pk_ccmpn = ccmp;
    if (pk_nw != 2'd0) pk_ccmpn = crc_upd(pk_ccmpn, pk_tmp[DW-1:0], BB);
    if (pk_nw == 2'd2) pk_ccmpn = crc_upd(pk_ccmpn, pk_tmp[2*DW-1:DW], BB);
  end

  // ================================================================ split-Rice section packers (§18)
  // K (4 bits per block start), Low (<= 7 bits per position) and Escape
  // (<= 9); Unary is the payload packer above. Sections past their RAM are
  // dropped: Low never is (<= 7 bits per symbol); an Escape section past
  // PDL words (> 3.5·MAX_BYTES bits) comes with >= 16/9 as many Unary bits,
  // so the record is longer than raw and bypassed.
  localparam integer KBITS = (MAX_BYTES / 2 + 63) / 64 * 4;                 // most K bits of a page
  localparam integer PDK = (KBITS + DW - 1) / DW;                           // K words per bank
  localparam integer KACC = (KBITS < DW) ? ((KBITS + 7) / 8) * 8 : DW;      // K accumulator bits
  localparam integer PDL = (7 * (MAX_BYTES / 2) + DW - 1) / DW;             // Low / Escape words per bank
  localparam integer SCW = AW + 3;
  wire           sp_go = c_split && c_go && !c_mark;
  wire [31:0]    sk_bytes, sk_crc, sl_bytes, sl_crc, se_bytes, se_crc;
  reg            sk_re, sl_re, se_re;
  reg  [SCW-1:0] s_ra;
  wire [DW-1:0]  sk_rd, sl_rd, se_rd;
  speckv_enc_sec #(.DW(DW), .IW(4), .PDW(PDK), .CW(SCW), .ACCW(KACC)) u_sk (
    .clk(clk), .rst(rst), .go(sp_go), .in_bits({1'b0, rc_kb}), .in_n(rc_blk ? 13'd4 : 13'd0),
    .bank(c_bank), .fin(c_end), .f_bytes(sk_bytes), .f_crc(sk_crc),
    .re(sk_re), .rbank(e_bank), .ra(s_ra), .rd(sk_rd));
  speckv_enc_sec #(.DW(DW), .IW(SLW), .PDW(PDL), .CW(SCW)) u_sl (
    .clk(clk), .rst(rst), .go(sp_go), .in_bits(sl_bits[SLW-1:0]), .in_n(sl_n),
    .bank(c_bank), .fin(c_end), .f_bytes(sl_bytes), .f_crc(sl_crc),
    .re(sl_re), .rbank(e_bank), .ra(s_ra), .rd(sl_rd));
  speckv_enc_sec #(.DW(DW), .IW(SEW), .PDW(PDL), .CW(SCW)) u_se (
    .clk(clk), .rst(rst), .go(sp_go), .in_bits(se_bits[SEW-1:0]), .in_n(se_n),
    .bank(c_bank), .fin(c_end), .f_bytes(se_bytes), .f_crc(se_crc),
    .re(se_re), .rbank(e_bank), .ra(s_ra), .rd(se_rd));

  // ================================================================ FIN
  reg              fn_v, fn_raw, fn_split;
  reg [BB*8-1:0]   fn_acc;
  reg [NBW:0]      fn_fill;
  reg [31:0]       fn_ccmp, fn_plen, fn_tot, fn_craw, fn_n;
  reg [AW:0]       fn_pwa;
  reg [15:0]       fn_layc, fn_scale;
  reg [7:0]        fn_mode, fn_dtype;
  wire [31:0]      fn_cbase = (fn_fill != 0) ? crc_upd(fn_ccmp, fn_acc, fn_fill) : fn_ccmp;
  // header bytes 5 (b) and 7 (flags: order | entropy << 2) of the mode (§9, §16, §18)
  wire [7:0]       fn_bits = (fn_mode == 8'd16 || fn_mode == 8'd31) ? 8'd6 :
                             (fn_mode == 8'd17 || fn_mode == 8'd32) ? 8'd5 : 8'd8;
  wire [7:0]       fn_flags = (fn_mode == 8'd1) ? 8'h05 : (fn_mode == 8'd2) ? 8'h00 : fn_split ? 8'h0C : 8'h08;
  // payload length: split Rice = scale, K, Low, Unary (fn_plen), Escape
  wire [31:0]      fn_len = fn_split ? 32'd2 + sk_bytes + sl_bytes + fn_plen + se_bytes : fn_plen;
  // §7: bypass when the quantised record is not shorter than the raw one
  wire             fn_byp = fn_raw || fn_len >= fn_tot;

  // record queue FIN -> HCRC, one entry per record (LSB first): the CRC
  // registers from 0 of Unary, Low, K; the byte counts of Escape, Unary, Low,
  // K (EMIT reads these sections in the order K, Low, Unary, Escape; a record
  // that is not split Rice has its whole payload, or the raw page, as "Unary");
  // the scale (split Rice: sent after the header); header bytes 0..19; the
  // CRC of the last section; payload length; split; raw; bank.
  localparam integer Q_CU = 0, Q_CL = 32, Q_CK = 64, Q_EB = 96, Q_UB = Q_EB + LB, Q_LB = Q_UB + LB,
                     Q_KB = Q_LB + LB, Q_SC = Q_KB + LB, Q_HD = Q_SC + 16, Q_CF = Q_HD + 160,
                     Q_PL = Q_CF + 32, Q_SP = Q_PL + 32, Q_RW = Q_SP + 1, Q_BK = Q_RW + 1, RQW = Q_BK + 2;
  wire [159:0]   fn_hdr = fn_byp ?
      {fn_tot, 16'd0, 16'd1, fn_n, 8'd0, 8'd0, 8'd0, fn_dtype, 8'd0, 8'd1, 16'h4B53} :
      {fn_len, 16'd0, fn_layc, fn_n, fn_flags, 8'd0, fn_bits, fn_dtype, fn_mode, 8'd1, 16'h4B53};
  wire           fn_sp = fn_split && !fn_byp;
  wire [RQW-1:0] rq_in = {fn_bank, fn_byp, fn_sp, fn_byp ? fn_tot : fn_len,
                          fn_byp ? fn_craw : fn_sp ? se_crc : fn_cbase, fn_hdr,
                          fn_sp ? fn_scale : 16'd0,
                          fn_sp ? sk_bytes[LB-1:0] : {LB{1'b0}}, fn_sp ? sl_bytes[LB-1:0] : {LB{1'b0}},
                          fn_byp ? fn_tot[LB-1:0] : fn_plen[LB-1:0], fn_sp ? se_bytes[LB-1:0] : {LB{1'b0}},
                          fn_sp ? sk_crc : 32'd0, fn_sp ? sl_crc : 32'd0, fn_sp ? fn_cbase : 32'd0};
  reg  [4*RQW-1:0] rq;
  reg  [1:0]       rq_wp, rq_rp;
  reg  [2:0]       rq_n;
  wire [RQW-1:0]   rqh = rq[rq_rp*RQW +: RQW];

  // ================================================================ HCRC: header CRC
  // The record's CRC register is the XOR of each part's register from 0
  // advanced over the bytes that follow it (multiplication by x^(8·len)):
  // header 0..19 (+ scale), then K, Low, Unary (or the whole payload) and the
  // last part's register as it is. One squaring chain x^(8·2^i) serves the
  // four exponents, one bit of each per cycle (LB cycles).
  reg  [1:0]     h_st;                 // 0 idle, 1 shifting, 2 done
  reg  [RQW-1:0] h_r;
  reg  [31:0]    pw0, pw1, pw2, pw3, kk;
  reg  [LB+1:0]  hx0, hx1, hx2, hx3;   // bytes after each part
  reg  [7:0]     ci;
  wire [31:0]    hdr_crc = ~(pw0 ^ pw1 ^ pw2 ^ pw3 ^ h_r[Q_CF +: 32]);
  wire [LB+1:0]  rq_eb = {2'b00, rqh[Q_EB +: LB]};
  wire [LB+1:0]  rq_ueb = rq_eb + {2'b00, rqh[Q_UB +: LB]};
  wire [LB+1:0]  rq_lueb = rq_ueb + {2'b00, rqh[Q_LB +: LB]};

  // ================================================================ EMIT
  // The record is the header (24 bytes; + the scale for split Rice), then up
  // to four RAM sections, each read from word 0 of the page's bank: K, Low,
  // Unary (the payload RAM, or the page RAM for a raw record), Escape. A
  // read side issues one word per cycle (the next section's first word
  // follows a section's last one) into a FIFO with its valid-byte count; an
  // output side appends the FIFO head at afill bytes of a 2-word
  // accumulator and sends a beat whenever it holds one (II = 1).
  reg              e_act;
  reg              e_raw;
  reg [2*DW-1:0]   eacc;               // record bytes not sent yet (afill of them)
  reg [NBW:0]      afill;
  reg [LB-1:0]     e_kb, e_lb, e_ub, e_eb;
  reg [1:0]        isec;               // section being read: 0 K, 1 Low, 2 Unary / payload / raw, 3 Escape
  reg [LB-1:0]     irb;                // its bytes not read yet
  reg [SCW-1:0]    iwi;                // its next word
  reg              idone;              // every word of the record issued
  reg              infl;               // a read was issued last cycle
  reg [1:0]        e_rsec;             // ... from this section
  reg [NBW-1:0]    e_rvb;              // ... with this many valid bytes
  reg [DW*FD-1:0]  fifo;
  reg [NBW*FD-1:0] fvb;
  reg [1:0]        fh, ft;
  reg [2:0]        fcnt;
  assign e_done = out_valid && out_ready && out_last;

  wire [DW-1:0]  src_rd = (e_rsec == 2'd0) ? sk_rd : (e_rsec == 2'd1) ? sl_rd : (e_rsec == 2'd3) ? se_rd :
                          e_raw ? pr_rd : pl_rdv[{e_par, e_bank[0]}*DW +: DW];
  wire           em_issue = e_act && !idone && ({1'b0, fcnt} + {3'd0, infl} < FD - 1);
  wire [NBW-1:0] i_vb = (irb > BB) ? BB : irb[NBW-1:0];
  wire [LB-1:0]  irb_n = irb - {{(LB-NBW){1'b0}}, i_vb};
  // the section after isec that has bytes
  wire [1:0]     i_nsec = (isec == 2'd0 && e_lb != 0) ? 2'd1 : (!isec[1] && e_ub != 0) ? 2'd2 : 2'd3;
  wire           i_nv = (isec == 2'd0 && e_lb != 0) || (!isec[1] && e_ub != 0) || (isec != 2'd3 && e_eb != 0);
  wire [LB-1:0]  i_nb = (i_nsec == 2'd1) ? e_lb : (i_nsec == 2'd2) ? e_ub : e_eb;
  wire [DW-1:0]  fifo_head = fifo[fh*DW +: DW];
  wire [NBW-1:0] fifo_hvb = fvb[fh*NBW +: NBW];
  // output side: take the head while there is room for a whole word, send a
  // beat when one is complete or the record's last bytes are in
  wire           em_take = e_act && fcnt != 3'd0 && afill < BB;
  wire [2*DW-1:0] em_tmp = eacc | (em_take ? ({{DW{1'b0}}, fifo_head} << (afill * 8)) : {(2*DW){1'b0}});
  wire [NBW+1:0] em_tf = {1'b0, afill} + (em_take ? {2'b00, fifo_hvb} : {(NBW+2){1'b0}});
  wire           em_allin = idone && !infl && fcnt == {2'b00, em_take};
  wire           em_out = e_act && (!out_valid || out_ready) && (em_tf >= BB || (em_allin && em_tf != 0));

  reg [SCW-1:0] em_rh;
  always @(*) begin
    pr_re = 1'b0;
    pr_ra = {(AW+2){1'b0}};
    pl_re = 1'b0;
    pl_par = 1'b0;
    pl_ra = {AH{1'b0}};
    sk_re = 1'b0;
    sl_re = 1'b0;
    se_re = 1'b0;
    s_ra = iwi;
    em_rh = iwi >> 1;
    if (em_issue) begin
      case (isec)
        2'd0: sk_re = 1'b1;
        2'd1: sl_re = 1'b1;
        2'd3: se_re = 1'b1;
        default:
          if (e_raw) begin pr_re = 1'b1; pr_ra = {e_bank, iwi[AW-1:0]}; end
          else begin pl_re = 1'b1; pl_par = iwi[0]; pl_ra = em_rh[AH-1:0]; end
      endcase
    end
  end

  // ================================================================ sequential
  always @(posedge clk) begin
    c_we <= 1'b0;
    fn_we <= 1'b0;
    if (rst) begin
      f_first <= 1'b1;
      fbank <= 2'd0;
      d_full <= 1'b0;
      alive <= 3'd0;
      r_act <= 1'b0;
      r_rk <= {(AW+1){1'b0}};
      r_nb <= {(AW+1){1'b0}};
      ccnt <= 2'd0;
      w_e32 <= 1'b0;
      cq_wp <= 1'b0;
      cq_rp <= 1'b0;
      q_v <= 1'b0;
      wv <= {NCH{1'b0}};
      wm <= {NCH{1'b0}};
      pbase <= 32'd0;
      rem <= 8'd0;
      lit <= 1'b0;
      acc <= {DW{1'b0}};
      fill <= 13'd16;
      plen <= 32'd16;
      rk <= 3'd0;
      pwa <= {(AW+1){1'b0}};
      ccmp <= 32'd0;
      fn_v <= 1'b0;
      rq_wp <= 2'd0;
      rq_rp <= 2'd0;
      rq_n <= 3'd0;
      h_st <= 2'd0;
      e_act <= 1'b0;
      out_valid <= 1'b0;
      out_last <= 1'b0;
      out_data <= {DW{1'b0}};
      out_nbytes <= {NBW{1'b0}};
      infl <= 1'b0;
      fcnt <= 3'd0;
      fh <= 2'd0;
      ft <= 2'd0;
    end else begin
      // ---------------------------------------------------------- LOAD
      if (r_take) d_full <= 1'b0;
      if (in_fire) begin
        if (f_first) begin
          f_mode <= cfg_mode;
          f_dtype <= cfg_dtype;
          f_ch <= cfg_channels;
        end
        f_first <= in_last;
        f_tot <= ln_tot;
        f_nbeats <= ln_nb;
        f_amax <= ln_amax;
        f_nonfin <= ln_nonfin;
        f_craw <= ln_craw;
        if (in_last) begin
          d_full <= 1'b1;
          d_bank <= fbank;
          d_mode <= f_first ? cfg_mode : f_mode;
          d_dtype <= dt_now;
          d_ch <= f_first ? cfg_channels : f_ch;
          d_tot <= ln_tot;
          d_nbeats <= ln_nb;
          d_amax <= ln_amax;
          d_nonfin <= ln_nonfin;
          d_craw <= ln_craw;
          fbank <= fbank + 2'd1;
        end
      end
      alive <= alive + {2'd0, in_fire && f_first} - {2'd0, e_done};

      // ---------------------------------------------------------- READ
      if (r_take) begin
        r_act <= 1'b1;
        r_rk <= {(AW+1){1'b0}};
        r_nb <= d_raw ? {{AW{1'b0}}, 1'b1} : d_nbeats;
        r_mark <= d_raw;
        r_bank <= d_bank;
        r_dtype <= d_dtype;
        r_es <= d_es;
        r_qmax <= d_qmax;
        r_rr <= d_rr;
        r_delta <= (d_mode == 8'd1);
        if (!d_raw) w_e32 <= d_e32;
        if (cq_wp) cq1 <= cq_in; else cq0 <= cq_in;
        cq_wp <= ~cq_wp;
      end else if (r_act) begin
        r_rk <= r_rk + 1'b1;
        if (r_rk + 1'b1 >= r_nb) r_act <= 1'b0;
      end
      ccnt <= ccnt + {1'b0, r_take} - {1'b0, c_end};

      // ---------------------------------------------------------- QUANT -> window (shifts every cycle)
      q_v <= r_act;
      if (r_act) begin
        q_mark <= r_mark;
        q_first <= (r_rk == {(AW+1){1'b0}});
        q_dtype <= r_dtype;
        q_es <= r_es;
        q_qmax <= r_qmax;
        q_rr <= r_rr;
        q_delta <= r_delta;
      end
      if (q_v) prev_q <= qd_last;
      if (w_e32) begin
        win <= {qd[CH*8-1:0], win[WS*8-1:CH*8]};
        wv <= {q_v, wv[NCH-1:1]};
        wm <= {q_v && q_mark, wm[NCH-1:1]};
      end else begin
        win <= {qd, win[WS*8-1:EMAX*8]};
        wv <= {q_v, q_v, wv[NCH-1:2]};
        wm <= {q_v && q_mark, q_v && q_mark, wm[NCH-1:2]};
      end

      // ---------------------------------------------------------- COMP
      if (c_go && !c_mark && pk_nw != 2'd0) begin
        c_we <= 1'b1;
        c_nw <= pk_nw;
        c_wb <= c_bank;
        c_wa <= pwa;
        c_wd0 <= pk_tmp[DW-1:0];
        c_wd1 <= pk_tmp[2*DW-1:DW];
      end
      if (c_go && !c_end) begin
        rem <= rem_n;
        lit <= lit_n;
        pbase <= pbase + ebeat;
        plen <= plen_e + {19'd0, pk_nin};
        acc <= pk_accn;
        fill <= pk_filln;
        rk <= rc_k;
        ccmp <= pk_ccmpn;
        pwa <= pwa + {{(AW-1){1'b0}}, pk_nw};
      end
      fn_v <= c_end;
      if (c_end) begin
        // hand the page to FIN, reset for the next one
        fn_raw <= c_mark;
        fn_split <= c_split;
        fn_scale <= c_scale;
        fn_acc <= pk_accn;
        fn_fill <= c_mark ? {(NBW+1){1'b0}} : pk_filln[NBW+2:3] + {{NBW{1'b0}}, pk_filln[2:0] != 3'd0};
        fn_ccmp <= pk_ccmpn;
        fn_plen <= (plen_e + {19'd0, pk_nin} + 32'd7) >> 3;   // bytes: the stream is padded with zero bits
        fn_pwa <= pwa + {{(AW-1){1'b0}}, pk_nw};
        fn_tot <= c_tot;
        fn_craw <= c_craw;
        fn_n <= c_n;
        fn_layc <= c_layc;
        fn_mode <= c_mode;
        fn_dtype <= c_dtype;
        fn_bank <= c_bank;
        cq_rp <= ~cq_rp;
        rem <= 8'd0;
        lit <= 1'b0;
        pbase <= 32'd0;
        plen <= 32'd16;
        acc <= {DW{1'b0}};
        fill <= 13'd16;
        rk <= 3'd0;
        ccmp <= 32'd0;
        pwa <= {(AW+1){1'b0}};
      end

      // ---------------------------------------------------------- FIN
      if (fn_v) begin
        if (!fn_raw && fn_fill != 0 && fn_pwa < PD) begin
          fn_we <= 1'b1;
          fn_wb <= fn_bank;
          fn_wa <= fn_pwa;
          fn_wd <= fn_acc;
        end
        rq[rq_wp*RQW +: RQW] <= rq_in;
        rq_wp <= rq_wp + 2'd1;
      end

      // ---------------------------------------------------------- HCRC
      case (h_st)
        2'd0: if (rq_n != 3'd0) begin
          h_r <= rqh;
          rq_rp <= rq_rp + 2'd1;
          // register over header bytes 0..19 (+ the scale when it is sent with the header)
          pw0 <= crc_upd(32'hFFFFFFFF, {{(BB*8-176){1'b0}}, rqh[Q_SC +: 16], rqh[Q_HD +: 160]},
                         rqh[Q_SP] ? 8'd22 : 8'd20);
          pw1 <= rqh[Q_CK +: 32];
          pw2 <= rqh[Q_CL +: 32];
          pw3 <= rqh[Q_CU +: 32];
          hx0 <= rqh[Q_SP] ? rq_lueb + {2'b00, rqh[Q_KB +: LB]} : rqh[Q_PL +: LB+2];
          hx1 <= rq_lueb;
          hx2 <= rq_ueb;
          hx3 <= rq_eb;
          kk <= 32'h00800000;
          ci <= 8'd0;
          h_st <= 2'd1;
        end
        2'd1: begin
          if (hx0[ci]) pw0 <= gf_mul(pw0, kk);
          if (hx1[ci]) pw1 <= gf_mul(pw1, kk);
          if (hx2[ci]) pw2 <= gf_mul(pw2, kk);
          if (hx3[ci]) pw3 <= gf_mul(pw3, kk);
          kk <= gf_mul(kk, kk);
          ci <= ci + 8'd1;
          if (ci == LB - 1) h_st <= 2'd2;
        end
        default: if (!e_act) begin
          // EMIT takes the record: the header (+ scale) is the accumulator's first bytes
          e_act <= 1'b1;
          e_raw <= h_r[Q_RW];
          e_bank <= h_r[Q_BK +: 2];
          eacc <= {{(2*DW-208){1'b0}}, h_r[Q_SC +: 16], hdr_crc, h_r[Q_HD +: 160]};
          afill <= h_r[Q_SP] ? 26 : 24;
          e_kb <= h_r[Q_KB +: LB];
          e_lb <= h_r[Q_LB +: LB];
          e_ub <= h_r[Q_UB +: LB];
          e_eb <= h_r[Q_EB +: LB];
          // the first section with bytes
          isec <= (h_r[Q_KB +: LB] != 0) ? 2'd0 : (h_r[Q_LB +: LB] != 0) ? 2'd1 : (h_r[Q_UB +: LB] != 0) ? 2'd2 : 2'd3;
          irb <= (h_r[Q_KB +: LB] != 0) ? h_r[Q_KB +: LB] : (h_r[Q_LB +: LB] != 0) ? h_r[Q_LB +: LB] :
                 (h_r[Q_UB +: LB] != 0) ? h_r[Q_UB +: LB] : h_r[Q_EB +: LB];
          iwi <= {SCW{1'b0}};
          idone <= 1'b0;
          infl <= 1'b0;
          fcnt <= 3'd0;
          fh <= 2'd0;
          ft <= 2'd0;
          h_st <= 2'd0;
        end
      endcase
      rq_n <= rq_n + {2'd0, fn_v} - {2'd0, h_st == 2'd0 && rq_n != 3'd0};

      // ---------------------------------------------------------- EMIT
      if (e_act) begin
        if (out_valid && out_ready) out_valid <= 1'b0;
        infl <= em_issue;
        if (em_issue) begin
          e_rsec <= isec;
          e_rvb <= i_vb;
          e_par <= iwi[0];
          if (irb_n == {LB{1'b0}}) begin
            // next section (from its word 0), or the record is issued
            if (i_nv) begin
              isec <= i_nsec;
              irb <= i_nb;
            end else begin
              idone <= 1'b1;
            end
            iwi <= {SCW{1'b0}};
          end else begin
            irb <= irb_n;
            iwi <= iwi + 1'b1;
          end
        end
        if (infl) begin
          // bytes past the section's end are masked off: the next section follows at once
          fifo[ft*DW +: DW] <= src_rd & ~({DW{1'b1}} << (e_rvb * 8));
          fvb[ft*NBW +: NBW] <= e_rvb;
          ft <= ft + 2'd1;
        end
        if (em_take) fh <= fh + 2'd1;
        fcnt <= fcnt + {2'd0, infl} - {2'd0, em_take};
        if (em_out) begin
          out_valid <= 1'b1;
          out_data <= em_tmp[DW-1:0];
          out_nbytes <= (em_tf >= BB) ? BB : em_tf[NBW-1:0];
          out_last <= em_allin && em_tf <= BB;
          eacc <= em_tmp >> DW;
          afill <= (em_tf >= BB) ? em_tf - BB : {(NBW+1){1'b0}};
        end else begin
          eacc <= em_tmp;
          afill <= em_tf[NBW:0];
        end
        if (e_done) begin
          out_last <= 1'b0;
          e_act <= 1'b0;
        end
      end
    end
  end
endmodule
`default_nettype wire

// One section packer of a split-Rice page (docs/codec.md §18: K, Low or
// Escape; the Unary section uses the encoder's payload packer). COMP appends
// up to IW < DW bits per beat (go); a whole DW-bit word goes to this
// section's RAM (one bank per page in flight, words past PDW are dropped: a
// section that long makes the record longer than raw, so the page is
// bypassed). fin (the page's last beat, after its bits) hands the state to
// FIN and starts the next page empty; in the next cycle (FIN) f_bytes and
// f_crc (CRC32C register from 0 over the section's bytes) are valid and the
// last partial word is written. No conflict between COMP's and FIN's writes:
// one beat is less than a word, so the next page's first word is completed
// at its second beat at the earliest, one cycle after FIN's write. A
// section that never fills a word (ACCW < DW: K at MAX_BYTES <= 32·DW) keeps
// an ACCW-bit accumulator and is written by FIN only.
`default_nettype none
module speckv_enc_sec #(
  parameter integer DW = 512,
  parameter integer IW = 224,          // most bits appended per beat, < DW
  parameter integer PDW = 28,          // words kept per bank
  parameter integer CW = 13,           // width of the word counter (counts past PDW)
  parameter integer ACCW = DW          // accumulator bits: DW, or the section's most bits if fewer
) (
  input  wire                       clk,
  input  wire                       rst,
  input  wire                       go,
  input  wire [IW-1:0]              in_bits,   // LSB first; zero above in_n
  input  wire [12:0]                in_n,
  input  wire [1:0]                 bank,
  input  wire                       fin,
  output wire [31:0]                f_bytes,
  output wire [31:0]                f_crc,
  input  wire                       re,
  input  wire [1:0]                 rbank,
  input  wire [CW-1:0]              ra,
  output wire [DW-1:0]              rd
);
  localparam integer BB = DW / 8;
  localparam integer PAW = (PDW > 1) ? $clog2(PDW) : 1;

  `include "speckv_codec_fn.vh"

  reg  [ACCW-1:0] acc, f_acc;
  reg  [DW-1:0]   w_d;
  reg  [12:0]     fill, f_fill;
  reg  [CW-1:0]   wa, f_wa;
  reg  [31:0]     crc, f_crc_r;
  reg  [1:0]      f_bank;
  reg             f_v, w_we;
  reg  [PAW+1:0]  w_a;

  wire [2*DW-1:0] tmp = {{(2*DW-ACCW){1'b0}}, acc} | ({{(2*DW-IW){1'b0}}, in_bits} << fill);
  wire [13:0]     nf = {1'b0, fill} + {1'b0, in_n};
  wire            full = (ACCW == DW) && go && nf >= DW;
  wire [ACCW-1:0] accn = !go ? acc : full ? tmp[DW +: ACCW] : tmp[ACCW-1:0];
  wire [12:0]     filln = !go ? fill : full ? nf[12:0] - DW : nf[12:0];
  wire [31:0]     crcn = full ? crc_upd(crc, tmp[DW-1:0], BB) : crc;
  wire [CW-1:0]   wan = wa + {{(CW-1){1'b0}}, full};
  wire [12:0]     f_nb13 = (f_fill + 13'd7) >> 3;
  wire [7:0]      f_nb = f_nb13[7:0];                   // bytes in the last (partial) word

  assign f_bytes = f_wa * BB + {24'd0, f_nb};
  assign f_crc = (f_nb != 8'd0) ? crc_upd(f_crc_r, {{(DW-ACCW){1'b0}}, f_acc}, f_nb) : f_crc_r;

  always @(posedge clk) begin
    w_we <= 1'b0;
    if (rst) begin
      acc <= {ACCW{1'b0}};
      fill <= 13'd0;
      wa <= {CW{1'b0}};
      crc <= 32'd0;
      f_v <= 1'b0;
    end else begin
      if (full && wa < PDW) begin
        w_we <= 1'b1;
        w_a <= {bank, wa[PAW-1:0]};
        w_d <= tmp[DW-1:0];
      end
      f_v <= fin;
      if (fin) begin
        f_acc <= accn;
        f_fill <= filln;
        f_crc_r <= crcn;
        f_wa <= wan;
        f_bank <= bank;
        acc <= {ACCW{1'b0}};
        fill <= 13'd0;
        wa <= {CW{1'b0}};
        crc <= 32'd0;
      end else begin
        acc <= accn;
        fill <= filln;
        wa <= wan;
        crc <= crcn;
      end
      // FIN: the last partial word (COMP cannot write in this cycle, see above)
      if (f_v && f_fill != 13'd0 && f_wa < PDW) begin
        w_we <= 1'b1;
        w_a <= {f_bank, f_wa[PAW-1:0]};
        w_d <= {{(DW-ACCW){1'b0}}, f_acc};
      end
    end
  end

  speckv_sdp_ram #(.W(DW), .D(4 << PAW), .AW(PAW + 2)) u_ram (
    .clk(clk), .we(w_we), .wa(w_a), .wd(w_d), .re(re), .ra({rbank, ra[PAW-1:0]}), .rd(rd));
endmodule
`default_nettype wire
