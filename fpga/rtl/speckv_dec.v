// SPDX-License-Identifier: Apache-2.0
// speckv KV codec: record decoder (docs/codec.md §1-§9, §18).
//
// Decodes raw records (mode 0) and quantised records with one page scale
// (group 0), scan order none/linear (or columnar with C = 1, the same
// thing), entropy bytes, RLE, Rice (§6.2) or split Rice (§18), any b in
// 3..8 and any dtype: this covers the presets paper (1), int8 (2), p8r (9),
// vp8/vp6/vp5 (15-17), p8rs (24), vp8s/vp6s/vp5s (30-32). Other valid
// records (channel/token scales, b 9..12 of §13, columnar with C > 1, split
// Rice of a page larger than MAX_BYTES) end with status UNSUP; the decoder
// still checks their header, length and CRC and never hangs on them.
//
// Split Rice is decoded from a buffer of the whole record (its last section
// is needed by the first symbol), once its length and CRC are known good,
// a beat of E symbols per cycle in parallel; see the section further down.
//
// Rice: the window is read at a bit offset (bo); one beat decodes its E
// symbols serially (a 3-bit k at every 64th symbol), reading bits past the
// record's end as zero like the C++; a symbol whose bits are not all in the
// window yet waits for them, or is a truncated stream once the input ended.
//
// A record arrives as DW-bit beats of record bytes (in_nbytes valid, BB on
// every beat but the last, in_last on the last): in_last gives the record
// length, like `len` of the C++ decode(). The decoded page leaves as DW-bit
// beats (out_nbytes valid, out_last on the last), then one status per record
// on st_*. Output is streamed before the CRC is known: a page whose status is
// not OK must be discarded by the consumer (the C++ decode() returns nothing
// for it). Every record the C++ decoder rejects ends with a status != OK.
//
// Records overlap: once record k's input has ended, the header of record
// k+1 is taken and its stream bytes queue in the window behind record k's,
// so record k+1's first output beat follows record k's last one with no gap
// (II=1 on the output across records). The status of record k is presented
// no earlier than record k's last output beat, and no output beat of record
// k+1 is presented before that status is accepted: a consumer that takes the
// status once no output beat is pending pairs beats and status correctly.
//
// Latency: the first output beat leaves 2 cycles after the beat that completes
// it is accepted; II=1 (one output beat per cycle) in the steady state, across
// records too, while the input keeps the window fed (a beat is decoded as soon
// as the window holds the bytes it reads; a raw 4 KiB record is 65 input beats).
`default_nettype none
module speckv_dec #(
  parameter integer DW = 512,           // data width in bits, multiple of 64, >= 256
  parameter integer MODES = 18,         // known mode ids 0..MODES-1 (§9 and appended presets; = codec::kModeCount)
  parameter integer MAX_BYTES = 4096    // split Rice: largest decoded page (the record buffer)
) (
  input  wire                       clk,
  input  wire                       rst,
  input  wire                       in_valid,
  output wire                       in_ready,
  input  wire [DW-1:0]              in_data,
  input  wire [$clog2(DW/8+1)-1:0]  in_nbytes,
  input  wire                       in_last,
  output reg                        out_valid,
  input  wire                       out_ready,
  output reg  [DW-1:0]              out_data,
  output reg  [$clog2(DW/8+1)-1:0]  out_nbytes,
  output reg                        out_last,
  output reg                        st_valid,
  input  wire                       st_ready,
  output reg  [3:0]                 st_code
);
  localparam integer BB = DW / 8;
  localparam integer NBW = $clog2(BB + 1);
  localparam integer EMAX = BB / 2;
  localparam integer WC = 3 * BB;                  // stream byte window
  localparam integer WFW = $clog2(WC + 1);
  // split Rice (§18): record buffer words per bank (a record of a page of at
  // most MAX_BYTES is at most MAX_BYTES + 24 bytes), blocks and K bytes
  localparam integer PDB = (MAX_BYTES + 24 + BB - 1) / BB;
  localparam integer RAW = (PDB > 1) ? $clog2(PDB) : 1;
  localparam integer NBMAX = (MAX_BYTES / 2 + 63) / 64;
  localparam integer NKB = (NBMAX + 1) / 2;
  localparam integer NBW6 = (NBMAX > 1) ? $clog2(NBMAX + 1) : 1;

  // status codes (st_code)
  localparam [3:0] ST_OK = 4'd0, ST_HDR = 4'd1, ST_LEN = 4'd2, ST_CRC = 4'd3, ST_SCALE = 4'd4,
                   ST_STREAM = 4'd5, ST_VALUE = 4'd6, ST_UNSUP = 4'd7;
  localparam [3:0] ST_SHORT = 4'd15;               // internal: the window ran out of bytes

  `include "speckv_codec_fn.vh"

  // X: the record being decoded (h_*, decode state); N: the next record,
  // whose header was taken after X's input ended (n_*). The input side
  // (rx, crc, in_end, i_*) follows the newest record: N if n_v, else X.
  reg        x_v, n_v;
  reg [7:0]  h_dtype, n_dtype;
  reg [31:0] h_n, h_plen, n_n, n_plen;
  reg        h_raw, h_delta, h_rle, n_raw, n_delta, n_rle;
  reg        h_rice, n_rice;      // entropy Rice (§6.2)
  reg        h_split, n_split;    // entropy split Rice (§18): decoded from the record buffer
  reg        h_bank, n_bank;      // its bank of the record buffer
  reg [3:0]  h_w, n_w;            // Rice escape width W = b + 1
  reg [7:0]  h_qmax, n_qmax;
  reg [15:0] h_scale, n_scale;
  reg [7:0]  h_ebeat, n_ebeat;    // elements per output beat
  reg [2:0]  h_esz, n_esz;
  reg [5:0]  h_soff, n_soff;      // record offset of the entropy stream: 24 raw, 26 quantised
  reg [3:0]  err, n_err;
  reg        unsup, n_unsup;
  reg        x_chk, x_lenbad, x_crcbad;  // X's length / CRC verdicts, saved when N's header came

  reg [32:0] rx;               // record bytes received (newest record)
  reg [31:0] crc;
  reg        in_end;
  reg [31:0] i_plen, i_crcf;
  reg        i_push;           // the newest record's stream bytes go to the window
  reg [WC*8-1:0] win;          // X's stream bytes (wk of them), then N's
  reg [WFW-1:0]  wfill, wk;
  reg [32:0] cc;               // stream bytes consumed
  reg [31:0] oc;               // bytes (raw) or elements (quantised) output
  reg        out_done;
  reg [7:0]  rem, runv, prev_s;
  reg        lit;
  reg [2:0]  rk;               // Rice: k of the current block
  reg [2:0]  bo;               // Rice: bits of window byte 0 already consumed

  wire [32:0] rec_end = {1'b0, i_plen} + 33'd24;

  // ---------------------------------------------------------------- beat 0: header (§8)
  reg [7:0]  p_mode, p_dtype, p_b, p_grp, p_flags;
  reg [31:0] p_n, p_plen, p_crc;
  reg [15:0] p_c, p_res, p_magic, p_f;
  reg [2:0]  p_esz;
  reg [34:0] p_raw;
  reg        p_ok, p_quant, p_unsup, p_scale_bad, p_split;
  always @(*) begin
    p_magic = in_data[15:0];
    p_mode = in_data[31:24];
    p_dtype = in_data[39:32];
    p_b = in_data[47:40];
    p_grp = in_data[55:48];
    p_flags = in_data[63:56];
    p_n = in_data[95:64];
    p_c = in_data[111:96];
    p_res = in_data[127:112];
    p_plen = in_data[159:128];
    p_crc = in_data[191:160];
    p_f = in_data[207:192];
    p_esz = (p_dtype == 8'd3) ? 3'd4 : (p_dtype == 8'd0) ? 3'd1 : 3'd2;
    p_raw = {3'd0, p_n} * p_esz;
    p_quant = (p_mode != 8'd0);
    p_ok = (in_nbytes >= 24) && p_magic == 16'h4B53 && in_data[23:16] == 8'd1 && p_mode < MODES &&
           p_dtype <= 8'd3 && p_res == 16'd0 && p_n != 32'd0 && p_n <= 32'h01000000 &&
           p_c != 16'd0 && (p_n % {16'd0, (p_c == 16'd0) ? 16'd1 : p_c}) == 32'd0;
    if (!p_quant)
      p_ok = p_ok && p_b == 8'd0 && p_grp == 8'd0 && p_flags == 8'd0 && {3'd0, p_plen} == p_raw;
    else
      // b > 8 with Rice or split Rice only (§13, §18)
      p_ok = p_ok && p_dtype != 8'd0 && p_b >= 8'd3 && p_b <= 8'd12 && (p_b <= 8'd8 || p_flags[3]) &&
             p_grp <= 8'd2 &&
             p_flags[1:0] != 2'd3 && p_flags[7:4] == 4'd0 &&
             {3'd0, p_plen} <= p_raw && (p_grp != 8'd0 || p_plen >= 32'd2);
    p_split = p_quant && p_flags[3:2] == 2'd3;
    // split Rice is decoded from a buffer of the whole record: pages up to MAX_BYTES
    p_unsup = p_quant && (p_grp != 8'd0 || p_b > 8'd8 || (p_flags[1:0] == 2'd2 && p_c != 16'd1) ||
                          (p_split && p_raw > MAX_BYTES));
    // §8: exponent in [20, 226]; §13: [27 - L, 226] = [28 - b, 226] when b > 8
    p_scale_bad = p_quant && (in_nbytes >= 26) && p_f != 16'd0 &&
                  (p_f[15] || p_f[14:7] < ((p_b > 8'd8) ? 8'd28 - p_b : 8'd20) || p_f[14:7] > 8'd226);
  end

  // ---------------------------------------------------------------- input side
  wire i_take = i_push && (n_v || (err == 4'd0 && !out_done));   // newest record still pushes
  wire hdr_slot = !x_v || (!n_v && in_end);                     // next beat in is a header
  assign in_ready = hdr_slot ? (wfill <= WC - BB) : (!in_end && (!i_take || wfill <= WC - BB));
  wire in_fire = in_valid && in_ready;
  wire hdr_fire = in_fire && hdr_slot;
  wire body_fire = in_fire && !hdr_slot;

  // bytes of this beat that belong to the entropy stream, shifted to byte 0
  reg [BB*8-1:0] pu_data;
  reg [32:0]     pu_cnt;
  reg            pu_en;
  reg [32:0]     pu_end;
  reg [5:0]      pu_soff;
  reg [BB*8-1:0] c0_word;
  always @(*) begin
    pu_data = in_data;
    pu_cnt = 33'd0;
    pu_en = 1'b0;
    pu_soff = p_quant ? 6'd26 : 6'd24;
    pu_end = 33'd0;
    if (hdr_slot) begin
      pu_end = ({1'b0, p_plen} + 33'd24 < {{(33-NBW){1'b0}}, in_nbytes}) ? {1'b0, p_plen} + 33'd24
                                                                        : {{(33-NBW){1'b0}}, in_nbytes};
      pu_cnt = (pu_end > {27'd0, pu_soff}) ? pu_end - {27'd0, pu_soff} : 33'd0;
      pu_data = in_data >> (pu_soff * 8);
      pu_en = p_ok && !p_unsup && !p_scale_bad && !p_split;
    end else begin
      pu_end = (rec_end > rx) ? rec_end - rx : 33'd0;
      pu_cnt = (pu_end < {{(33-NBW){1'b0}}, in_nbytes}) ? pu_end : {{(33-NBW){1'b0}}, in_nbytes};
      pu_en = i_take;
    end
    if (!in_fire) pu_en = 1'b0;
    if (pu_cnt < BB) pu_data = pu_data & ~({BB*8{1'b1}} << (pu_cnt * 8));
    // CRC of beat 0 skips the CRC field (bytes 20..23)
    c0_word = {32'd0, in_data[BB*8-1:192], in_data[159:0]};
  end

  // ---------------------------------------------------------------- split Rice (§18): record buffer
  // Every beat of a split-Rice record that passes the header checks is
  // written, as it arrives, to the record buffer (one bank per record in
  // flight: X decodes from one while N arrives in the other; three copies,
  // one per section reader). The K bytes are kept in registers; a stage one
  // cycle behind the input (rs_*) finds the section bounds: Unary starts at
  // us = 26 + K bytes + Low bytes (from the k fields), and ends with the
  // byte of the n-th one-bit (counted per beat: byte popcounts), so Escape
  // starts at ue; it also checks the K fields, the Low padding bits, that
  // the n-th one exists and is the last one-bit of its byte.
  reg            i_buf;               // the newest record is buffered
  reg            i_bank;              // ... in this bank
  reg  [RAW+1:0] i_beat;              // its next beat (saturates at PDB)
  reg  [31:0]    i_n;
  wire           b_hdr = p_ok && !p_unsup && !p_scale_bad && p_split;
  wire           b_fire = hdr_fire ? b_hdr : (body_fire && i_buf);
  wire           b_bank = hdr_fire ? ~i_bank : i_bank;
  wire [RAW+1:0] b_beat = hdr_fire ? {(RAW+2){1'b0}} : i_beat;
  wire           b_we = b_fire && b_beat < PDB;
  reg  [NKB*8-1:0] kreg0, kreg1;      // K bytes of bank 0 / 1
  // the stage behind the input
  reg            rs_v, rs_first, rs_last, rs_bank;
  reg  [BB*8-1:0] rs_d;
  reg  [NBW-1:0] rs_nb;
  reg  [31:0]    rs_base;             // record offset of the beat's byte 0
  reg  [15:0]    rs_cnt;              // one-bits counted in Unary so far
  reg            rs_found, rs_bad;
  reg  [31:0]    rs_ue;
  // per bank: bounds found (done), a section error (bad), us, ue
  reg  [1:0]     r_done, r_bad;
  reg  [31:0]    r_us0, r_us1, r_ue0, r_ue1;

  wire [NKB*8-1:0] rs_k = rs_bank ? kreg1 : kreg0;
  // the K registers of the newest record's bank with this beat's K bytes (record bytes 26 ..)
  reg  [NKB*8-1:0] kn_next;
  integer        kj;
  always @(*) begin
    kn_next = b_bank ? kreg1 : kreg0;
    kj = 0;
    for (kj = 0; kj < NKB; kj = kj + 1)
      if (b_beat == (26 + kj) / BB) kn_next[kj*8 +: 8] = in_data[((26 + kj) % BB)*8 +: 8];
  end
  reg  [NBW6-1:0] rs_nbl;             // blocks
  reg  [NBW6-1:0] rs_nkb;             // K bytes
  reg  [31:0]    rs_ks, rs_lowb;      // sum of the k fields, Low bits
  reg  [3:0]     rs_kl;               // the last block's k
  reg            rs_kbad;
  reg  [31:0]    rs_us, rs_rend;
  reg  [NBW+1:0] rs_ulo, rs_uhi;      // Unary bytes of this beat: [rs_ulo, rs_uhi)
  reg  [15:0]    rs_rem, rs_acc;
  reg  [BB*16-1:0] rs_pp;
  reg  [BB-1:0]  rs_in, rs_hit, rs_hit1, rs_msk;
  reg  [NBW-1:0] rs_hi;
  reg            rs_f, rs_x, rs_lpbad;
  reg  [31:0]    rs_fpos, rs_lp;
  reg  [7:0]     rs_byte;
  reg  [3:0]     rs_pc;
  integer        ri, rb;
  always @(*) begin
    rs_nbl = (i_n[NBW6+5:0] + 63) >> 6;
    rs_nkb = (rs_nbl + 1'b1) >> 1;
    rs_ks = 32'd0;
    rs_kl = 4'd0;
    rs_kbad = 1'b0;
    ri = 0;
    rb = 0;
    for (ri = 0; ri < 2 * NKB; ri = ri + 1) begin
      if (ri < rs_nbl) begin
        rs_ks = rs_ks + {28'd0, rs_k[ri*4 +: 4]};
        if (rs_k[ri*4 + 3]) rs_kbad = 1'b1;           // k field >= 8
      end
      if (ri + 1 == rs_nbl) rs_kl = rs_k[ri*4 +: 4];
      if (ri == rs_nbl && rs_nbl[0] && rs_k[ri*4 +: 4] != 4'd0) rs_kbad = 1'b1;   // padding nibble (odd block count)
    end
    // Low bits: 64 symbols per block but the last
    rs_lowb = (rs_ks << 6) - (({{(32-NBW6){1'b0}}, rs_nbl} << 6) - i_n) * {28'd0, rs_kl};
    rs_us = 32'd26 + {{(32-NBW6){1'b0}}, rs_nkb} + ((rs_lowb + 32'd7) >> 3);
    rs_rend = i_plen + 32'd24;
    rs_ulo = (rs_us > rs_base) ? ((rs_us - rs_base > BB) ? BB : rs_us - rs_base) : 0;
    rs_uhi = (rs_rend > rs_base) ? ((rs_rend - rs_base > rs_nb) ? rs_nb : rs_rend - rs_base) : 0;
    // one-bits of Unary bytes in this beat, up to the n-th
    rs_rem = i_n[15:0] - (rs_first ? 16'd0 : rs_cnt);
    rs_acc = 16'd0;
    rs_f = rs_first ? 1'b0 : rs_found;
    rs_x = 1'b0;
    rs_fpos = rs_first ? 32'd0 : rs_ue;
    rs_pc = 4'd0;
    rs_byte = 8'd0;
    // byte popcounts of the beat's Unary bytes and their prefix sums (log depth);
    // the first byte whose running count reaches the n-th one-bit ends Unary
    rs_pp = {BB*16{1'b0}};
    for (ri = 0; ri < BB; ri = ri + 1) begin
      rs_byte = rs_d[ri*8 +: 8];
      rs_pc = ((rs_byte[0] + rs_byte[1]) + (rs_byte[2] + rs_byte[3])) + ((rs_byte[4] + rs_byte[5]) + (rs_byte[6] + rs_byte[7]));
      rs_in[ri] = !rs_f && ri >= rs_ulo && ri < rs_uhi;
      if (rs_in[ri]) rs_pp[ri*16 +: 16] = {12'd0, rs_pc};
    end
    for (rb = 1; rb < BB; rb = rb * 2)
      for (ri = BB - 1; ri >= rb; ri = ri - 1) rs_pp[ri*16 +: 16] = rs_pp[ri*16 +: 16] + rs_pp[(ri - rb)*16 +: 16];
    for (ri = 0; ri < BB; ri = ri + 1) rs_hit[ri] = rs_in[ri] && rs_pp[ri*16 +: 16] >= rs_rem;
    rs_hit1 = rs_hit & (~rs_hit + 1'b1);
    for (rb = 0; rb < NBW; rb = rb + 1) begin
      for (ri = 0; ri < BB; ri = ri + 1) rs_msk[ri] = (ri >> rb) & 1;
      rs_hi[rb] = |(rs_hit1 & rs_msk);
    end
    rs_acc = rs_pp[(BB-1)*16 +: 16];
    if (rs_hit != {BB{1'b0}}) begin
      rs_f = 1'b1;
      rs_acc = rs_pp >> (rs_hi * 16);
      rs_fpos = rs_base + rs_hi + 1;                  // Escape starts after this byte
      rs_x = (rs_acc != rs_rem);                      // a one-bit after the n-th in its byte
    end
    // the last Low byte: bits past the Low bits are zero
    rs_lp = rs_us - 32'd1 - rs_base;
    rs_lpbad = 1'b0;
    if (rs_lowb[2:0] != 3'd0 && rs_us > rs_base && rs_lp < rs_nb) begin
      rs_byte = rs_d >> (rs_lp * 8);
      rs_lpbad = (rs_byte >> rs_lowb[2:0]) != 8'd0;
    end
  end

  // ---------------------------------------------------------------- decode step
  wire        ended = n_v || in_end || (rx >= rec_end);     // X's input is complete
  // no beat of X goes out before the previous record's status is taken
  wire        st_free = !st_valid || st_ready;
  reg  [31:0] ds_m;            // symbols (quantised) or bytes (raw) of this beat
  reg         ds_go;
  reg  [3:0]  ds_err;
  reg  [WFW:0] ds_p;           // stream bytes consumed by this beat
  reg  [7:0]  ds_rem, ds_rv, ds_ps, ds_sym, ds_c, ds_mag;
  reg         ds_lit;
  reg  [31:0] ds_bits, ds_l, ds_left;
  reg  [DW-1:0] ds_word;
  reg  [EMAX*8-1:0] ds_sv;      // the beat's symbols
  // Rice (§6.2)
  reg  [WC*8+31:0] rw;         // X's window bits from the read position, zero past X's bytes
  reg  [12:0] ra, rp, re;      // bits available, bits read by this beat, window bit where it ends
  reg  [4:0]  ru, rl;          // unary length (capped at 15), code length
  reg  [23:0] r24;
  reg  [10:0] rz;              // (14 << 7) | 127 at most before the range check
  reg  [23:0] rlow;
  reg  [2:0]  rk_n, bo_n;
  reg  [11:0] rv, rmag;        // value (two's complement) and |value|
  reg  [7:0]  rpad;
  integer     dj, rt;
  always @(*) begin
    ds_m = 32'd0;
    dj = 0;
    ds_go = 1'b0;
    ds_err = 4'd0;
    ds_p = {(WFW+1){1'b0}};
    ds_rem = rem;
    ds_lit = lit;
    ds_rv = runv;
    ds_ps = prev_s;
    ds_sym = 8'd0;
    ds_c = 8'd0;
    ds_mag = 8'd0;
    ds_bits = 32'd0;
    ds_l = 32'd0;
    ds_left = 32'd0;
    ds_word = {DW{1'b0}};
    ds_sv = {EMAX*8{1'b0}};
    rw = {(WC*8+32){1'b0}};
    ra = 13'd0;
    rp = 13'd0;
    re = 13'd0;
    ru = 5'd0;
    rl = 5'd0;
    r24 = 24'd0;
    rz = 11'd0;
    rlow = 24'd0;
    rk_n = rk;
    bo_n = bo;
    rv = 12'd0;
    rmag = 12'd0;
    rpad = 8'd0;
    rt = 0;
    if (x_v && err == 4'd0 && !unsup && !out_done && (!out_valid || out_ready) && st_free) begin
      if (h_raw) begin
        ds_m = (h_plen - oc < BB) ? h_plen - oc : BB;
        if ({1'b0, wk} >= ds_m[WFW:0]) begin
          ds_go = 1'b1;
          ds_p = ds_m[WFW:0];
          ds_word = win[BB*8-1:0] & ~({BB*8{1'b1}} << (ds_m * 8));
        end else if (ended) begin
          ds_err = ST_STREAM;
        end
      end else begin
        ds_m = (h_n - oc < h_ebeat) ? h_n - oc : {24'd0, h_ebeat};
        // greedy: the beat goes as soon as the window holds the bytes it reads
        // (split Rice: as soon as the three section windows hold its bits)
        begin
          ds_go = h_split ? sp_go : 1'b1;
          if (h_rice) begin
            rw = {32'd0, win & ~({WC*8{1'b1}} << {wk, 3'b000})} >> bo;
            ra = {{(10-WFW){1'b0}}, wk, 3'b000} - {10'd0, bo};
          end
          for (dj = 0; dj < EMAX; dj = dj + 1)
            if (dj < ds_m && ds_err == 4'd0) begin
              ds_left = h_n - oc - dj;
              if (h_rice) begin
                // a block of 64 symbols starts with its k
                if (((oc + dj) & 32'd63) == 32'd0) begin
                  if (rp + 13'd3 > ra) ds_err = ST_SHORT;
                  else begin rk_n = rw[rp +: 3]; rp = rp + 13'd3; end
                end
                if (ds_err == 4'd0) begin
                  r24 = rw[rp +: 24];
                  ru = 5'd0;
                  for (rt = 0; rt < 15; rt = rt + 1)
                    if (r24[rt] && ru == rt) ru = ru + 5'd1;
                  if (ru < 5'd15) begin
                    rlow = r24 >> (ru + 5'd1);
                    rz = ({6'd0, ru} << rk_n) | ({4'd0, rlow[6:0]} & ((11'd1 << rk_n) - 11'd1));
                    rl = ru + 5'd1 + {2'd0, rk_n};
                  end else begin
                    rz = {2'd0, r24[23:15]} & ((11'd1 << h_w) - 11'd1);
                    rl = 5'd15 + {1'b0, h_w};
                  end
                  // every bit the code reads is one it consumes: all of them must be here
                  if (rp + {8'd0, rl} > ra) ds_err = ST_SHORT;
                  else begin
                    rp = rp + {8'd0, rl};
                    rv = rz[0] ? ~{2'd0, rz[10:1]} : {2'd0, rz[10:1]};   // unzigzag
                    if (h_delta) rv = rv + {{4{ds_ps[7]}}, ds_ps};
                    rmag = rv[11] ? 12'd0 - rv : rv;
                    if (rz > {1'b0, h_qmax, 2'b00} || rmag > {4'd0, h_qmax}) ds_err = ST_VALUE;
                    ds_sym = rv[7:0];
                  end
                end
              end else if (!h_rle) begin
                if (ds_p >= wk) ds_err = ST_SHORT;
                else begin ds_sym = win[ds_p*8 +: 8]; ds_p = ds_p + 1'b1; end
              end else begin
                if (ds_rem == 8'd0) begin
                  if (ds_p >= wk) ds_err = ST_SHORT;
                  else begin
                    ds_c = win[ds_p*8 +: 8];
                    ds_p = ds_p + 1'b1;
                    if (!ds_c[7]) begin
                      ds_l = {24'd0, ds_c} + 32'd1;
                      ds_lit = 1'b1;
                    end else begin
                      ds_l = {25'd0, ds_c[6:0]} + 32'd3;
                      ds_lit = 1'b0;
                    end
                    if (ds_l > ds_left) ds_err = ST_STREAM;
                    else if (!ds_lit) begin
                      if (ds_p >= wk) ds_err = ST_SHORT;
                      else begin ds_rv = win[ds_p*8 +: 8]; ds_p = ds_p + 1'b1; end
                    end
                    ds_rem = ds_l[7:0];
                  end
                end
                if (ds_err == 4'd0) begin
                  if (ds_lit) begin
                    if (ds_p >= wk) ds_err = ST_SHORT;
                    else begin ds_sym = win[ds_p*8 +: 8]; ds_p = ds_p + 1'b1; end
                  end else begin
                    ds_sym = ds_rv;
                  end
                  ds_rem = ds_rem - 8'd1;
                end
              end
              if (ds_err == 4'd0 && !h_rice) begin
                ds_sym = h_delta ? ds_ps + ds_sym : ds_sym;    // §6.0, wrapping
                ds_mag = ds_sym[7] ? 8'd0 - ds_sym : ds_sym;    // 0x80 -> 0x80 = 128
                if (ds_sym == 8'h80 || ds_mag > h_qmax) ds_err = ST_VALUE;
              end
              if (ds_err == 4'd0) begin
                ds_ps = ds_sym;
                ds_sv[dj*8 +: 8] = ds_sym;
              end
            end
          // dequantise: this beat's symbols, or the split-Rice decode's (kept off
          // the chain above: the two are never used together)
          for (dj = 0; dj < EMAX; dj = dj + 1) begin
            ds_bits = dequant_bits(h_split ? sp_sym[dj*8 +: 8] : ds_sv[dj*8 +: 8], h_scale);
            if (h_dtype == 8'd3) begin
              if (dj < BB / 4) ds_word[dj*32 +: 32] = ds_bits;
            end else if (h_dtype == 8'd2)
              ds_word[dj*16 +: 16] = fp32_to_bf16(ds_bits);
            else
              ds_word[dj*16 +: 16] = fp32_to_fp16_sat(ds_bits);
          end
          ds_word = ds_word & ~({DW{1'b1}} << (ds_m[NBW-1:0] * h_esz * 8));
          if (h_rice && ds_err == 4'd0) begin
            // bytes consumed; the last beat also takes the padding byte, whose
            // bits past the stream must be zero
            re = rp + {10'd0, bo};
            if (oc + ds_m == h_n && re[2:0] != 3'd0) begin
              rpad = rw[rp +: 8] & ((8'd1 << (4'd8 - {1'b0, re[2:0]})) - 8'd1);
              if (rpad != 8'd0) ds_err = ST_STREAM;
              ds_p = re[WFW+3:3] + 1'b1;
              bo_n = 3'd0;
            end else begin
              ds_p = re[WFW+3:3];
              bo_n = re[2:0];
            end
          end
          if (h_split) begin ds_err = sp_err; ds_ps = sp_ps; ds_p = {(WFW+1){1'b0}}; end
          if (ds_err != 4'd0) ds_go = 1'b0;
          // out of bytes: wait for more, or a truncated stream once the input has ended
          if (ds_err == ST_SHORT) ds_err = ended ? ST_STREAM : 4'd0;
        end
      end
    end
  end

  // X's length / CRC verdicts (final once X's input has ended)
  wire        lenbad = x_chk ? x_lenbad : (rx != rec_end);
  wire        crcbad = x_chk ? x_crcbad : (~crc != i_crcf);

  // ---------------------------------------------------------------- split Rice (§18): decode of X
  // Three readers over X's buffer bank: Low from byte 26 + K bytes, Unary
  // from us, Escape from ue. A beat's E symbols are decoded in parallel,
  // none waits for the one before it (the point of §18):
  // * k: from the K registers (a beat spans at most two blocks: kA, then kB
  //   from symbol sp_bnd on); Low fields at fixed offsets t·kA (then
  //   sp_bnd·kA + (t - sp_bnd)·kB).
  // * Unary: symbol t ends at the (t+1)-th one-bit of the window's first UW
  //   bits: chunk popcounts, their prefix sums (log depth), the chunk that
  //   holds it, the bit inside that chunk; v_t = the distance from the
  //   previous one-bit, minus one (v >= 15: an escape, however long).
  // * Escape: W - k bits for each escape, at a prefix sum of the widths.
  // * delta (order linear): a prefix sum of the values; z <= 4Q, |s| <= Q.
  // The beat goes when all its bits are in the three windows. If the
  // Unary view is full without E one-bits, it has a run of 16 zero-bits (no
  // valid stream has one): a cycle deletes up to 16 of its zeros after the
  // 15th, which reads the same (v >= 15), until the symbols fit the view.
  localparam integer WBU = 3 * DW;                 // Unary: up to 16 bits per symbol, DW per beat
  localparam integer WBL = DW + 14 * EMAX;         // Low: up to 7 bits per symbol
  localparam integer WBE = DW + 18 * EMAX;         // Escape: up to 9 bits per symbol
  localparam integer UW = EMAX * 16;               // the Unary bits a beat decodes from (= DW)
  localparam integer NCK = EMAX;                   // their 16-bit chunks
  localparam integer CKW = (NCK > 1) ? $clog2(NCK) : 1;
  wire [WBU-1:0] uwin;
  wire [WBL-1:0] lwin;
  wire [WBE-1:0] ewin;
  wire [13:0]    uav, lav, eav;
  reg            sp_on;                // X's readers are started
  reg  [31:0]    sp_eabs;              // record bit position of X's next Escape bit
  reg  [31:0]    sp_urem;              // bits of X's Unary section not consumed yet
  wire [NKB*8-1:0] h_k = h_bank ? kreg1 : kreg0;
  wire [31:0]    h_us = h_bank ? r_us1 : r_us0;
  wire [31:0]    h_ue = h_bank ? r_ue1 : r_ue0;
  wire           h_rdone = h_bank ? r_done[1] : r_done[0];
  wire           h_rbad = h_bank ? r_bad[1] : r_bad[0];
  wire [31:0]    h_rend = h_plen + 32'd24;

  reg  [EMAX*8-1:0] sp_sym;
  reg            sp_go, sp_del;
  reg  [3:0]     sp_err;
  reg  [13:0]    sp_lc, sp_uc, sp_ec, sp_dp;
  reg  [4:0]     sp_dn;
  reg  [7:0]     sp_ps;
  reg  [31:0]    sp_m, sp_j0, sp_epos;
  reg  [3:0]     sp_ka, sp_kb, sp_k, sp_pad, sp_wa, sp_wb;
  reg  [6:0]     sp_bnd;
  reg  [13:0]    sp_lo;
  reg            sp_full, sp_bad, sp_verr, sp_last;
  // Unary view
  reg  [UW-1:0]      su;
  reg  [NCK*5-1:0]   su_pc;            // one-bits per chunk
  reg  [NCK*14-1:0]  su_pi;            // their inclusive prefix sums
  reg  [13:0]        su_tot;
  reg  [CKW:0]       su_c;             // chunk of a symbol's one-bit
  reg  [13:0]        su_vis;           // view bits: min(avail, the section's bits left)
  reg  [15:0]        su_x;
  reg  [3:0]         su_p8;
  reg  [15:0]        su_cb;
  reg  [13:0]        su_pe;
  reg  [4:0]         su_r;
  reg  [3:0]         su_bp;
  reg  [EMAX*14-1:0] su_pos, su_v;     // per symbol: its one-bit, its zero-bits
  reg  [EMAX-1:0]    su_found, su_long, su_lf;
  reg  [13:0]        su_a, su_b;
  // per symbol fields
  reg  [EMAX*4-1:0]  sp_w;             // escape widths
  reg  [EMAX*14-1:0] sp_wp;            // their inclusive prefix sums
  reg  [EMAX*16-1:0] sp_sv;            // delta prefix sums / values
  reg  [13:0]        sp_ept;
  reg  [8:0]         sp_e;
  reg  [6:0]         sp_low;
  reg  [15:0]        sp_z;
  reg  [15:0]        sp_d, sp_s, sp_mag;
  reg  [EMAX*16-1:0] sp_zv;
  integer            sj, sc, sb, sd;
  always @(*) begin
    sp_sym = {EMAX*8{1'b0}};
    sp_go = 1'b0;
    sp_del = 1'b0;
    sp_err = 4'd0;
    sp_lc = 14'd0;
    sp_uc = 14'd0;
    sp_ec = 14'd0;
    sp_dp = 14'd0;
    sp_dn = 5'd0;
    sp_ps = prev_s;
    sp_m = (h_n - oc < h_ebeat) ? h_n - oc : {24'd0, h_ebeat};
    sp_last = (oc + sp_m == h_n);
    sp_j0 = oc >> 6;
    sp_ka = h_k[sp_j0*4 +: 4];
    sp_kb = h_k[(sp_j0 + 1)*4 +: 4];
    sp_bnd = 7'd64 - {1'b0, oc[5:0]};
    // escape field widths of the two blocks: max(W - k, 0)
    sp_wa = ({1'b0, h_w} > sp_ka) ? {1'b0, h_w} - sp_ka : 4'd0;
    sp_wb = ({1'b0, h_w} > sp_kb) ? {1'b0, h_w} - sp_kb : 4'd0;
    sp_k = 4'd0;
    sp_lo = 14'd0;
    sp_full = 1'b0;
    sp_bad = 1'b0;
    sp_verr = 1'b0;
    sp_epos = 32'd0;
    sp_pad = 4'd0;
    sp_ept = 14'd0;
    sp_e = 9'd0;
    sp_low = 7'd0;
    sp_z = 16'd0;
    sp_d = 16'd0;
    sp_s = 16'd0;
    sp_mag = 16'd0;
    sp_zv = {EMAX*16{1'b0}};
    sp_w = {EMAX*4{1'b0}};
    sp_wp = {EMAX*14{1'b0}};
    sp_sv = {EMAX*16{1'b0}};
    su = uwin[UW-1:0];
    su_pc = {NCK*5{1'b0}};
    su_pi = {NCK*14{1'b0}};
    su_c = {(CKW+1){1'b0}};
    su_vis = 14'd0;
    su_x = 16'd0;
    su_p8 = 4'd0;
    su_cb = 16'd0;
    su_pe = 14'd0;
    su_r = 5'd0;
    su_bp = 4'd0;
    su_pos = {EMAX*14{1'b0}};
    su_v = {EMAX*14{1'b0}};
    su_found = {EMAX{1'b0}};
    su_long = {EMAX{1'b0}};
    su_lf = {EMAX{1'b0}};
    su_a = 14'd0;
    su_b = 14'd0;
    sj = 0;
    sc = 0;
    sb = 0;
    sd = 0;
    // ---- Unary: where each symbol's one-bit is, in the view (the section's bits in the window)
    su_vis = ({18'd0, uav} < sp_urem) ? uav : sp_urem[13:0];
    su = uwin[UW-1:0] & ~({UW{1'b1}} << su_vis);
    for (sc = 0; sc < NCK; sc = sc + 1) begin
      su_pc[sc*5 +: 5] = (({4'd0, su[sc*16]} + su[sc*16+1]) + (su[sc*16+2] + su[sc*16+3])) +
                         ((su[sc*16+4] + su[sc*16+5]) + (su[sc*16+6] + su[sc*16+7])) +
                         (((su[sc*16+8] + su[sc*16+9]) + (su[sc*16+10] + su[sc*16+11])) +
                          ((su[sc*16+12] + su[sc*16+13]) + (su[sc*16+14] + su[sc*16+15])));
      su_pi[sc*14 +: 14] = {9'd0, su_pc[sc*5 +: 5]};
    end
    for (sd = 1; sd < NCK; sd = sd * 2)              // Kogge-Stone: log2(NCK) levels
      for (sc = NCK - 1; sc >= sd; sc = sc - 1)
        su_pi[sc*14 +: 14] = su_pi[sc*14 +: 14] + su_pi[(sc - sd)*14 +: 14];
    su_tot = su_pi[(NCK-1)*14 +: 14];
    for (sj = 0; sj < EMAX; sj = sj + 1) begin
      // its chunk: the chunks whose prefix sum is <= sj come before it (binary search, the sums rise)
      su_c = {(CKW+1){1'b0}};
      for (sd = 1 << (CKW - 1); sd >= 1; sd = sd / 2)
        if (su_c + sd <= NCK && su_pi[(su_c + sd - 1)*14 +: 14] <= sj) su_c = su_c + sd;
      su_cb = su >> (su_c * 16);
      su_pe = (su_c == 0) ? 14'd0 : su_pi[(su_c - 1)*14 +: 14];
      su_r = sj - su_pe[4:0];                          // rank of the one-bit in the chunk
      // the (su_r+1)-th one-bit of the chunk: halves, quarters, ... by their popcounts
      su_bp = 4'd0;
      su_x = su_cb;
      su_p8 = ((su_x[0] + su_x[1]) + (su_x[2] + su_x[3])) + ((su_x[4] + su_x[5]) + (su_x[6] + su_x[7]));
      if ({1'b0, su_p8} <= su_r) begin su_r = su_r - {1'b0, su_p8}; su_bp = su_bp + 4'd8; su_x = su_x >> 8; end
      su_p8 = (su_x[0] + su_x[1]) + (su_x[2] + su_x[3]);
      if ({1'b0, su_p8} <= su_r) begin su_r = su_r - {1'b0, su_p8}; su_bp = su_bp + 4'd4; su_x = su_x >> 4; end
      su_p8 = su_x[0] + su_x[1];
      if ({1'b0, su_p8} <= su_r) begin su_r = su_r - {1'b0, su_p8}; su_bp = su_bp + 4'd2; su_x = su_x >> 2; end
      if ({4'd0, su_x[0]} <= su_r) su_bp = su_bp + 4'd1;
      su_pos[sj*14 +: 14] = {su_c[CKW-1:0], 4'b0000} + {10'd0, su_bp};
      su_found[sj] = su_tot > sj;
      su_v[sj*14 +: 14] = (sj == 0) ? su_pos[13:0] : su_pos[sj*14 +: 14] - su_pos[(sj-1)*14 +: 14] - 14'd1;
      su_long[sj] = su_found[sj] && su_v[sj*14 +: 14] >= 14'd16;
    end
    // ---- Escape widths and offsets, values
    for (sj = 0; sj < EMAX; sj = sj + 1) begin
      if (sj < sp_m && su_v[sj*14 +: 14] >= 14'd15) sp_w[sj*4 +: 4] = (sj < sp_bnd) ? sp_wa : sp_wb;
      sp_wp[sj*14 +: 14] = {10'd0, sp_w[sj*4 +: 4]};
    end
    for (sd = 1; sd < EMAX; sd = sd * 2)
      for (sj = EMAX - 1; sj >= sd; sj = sj - 1) sp_wp[sj*14 +: 14] = sp_wp[sj*14 +: 14] + sp_wp[(sj - sd)*14 +: 14];
    for (sj = 0; sj < EMAX; sj = sj + 1) begin
      sp_k = (sj < sp_bnd) ? sp_ka : sp_kb;
      sp_lo = (sj < sp_bnd) ? sj * sp_ka : sp_bnd * sp_ka + (sj - sp_bnd) * sp_kb;
      sp_low = lwin[sp_lo +: 7] & ((7'd1 << sp_k[2:0]) - 7'd1);
      sp_ept = sp_wp[sj*14 +: 14] - {10'd0, sp_w[sj*4 +: 4]};
      sp_e = ewin[sp_ept +: 9] & ((9'd1 << sp_w[sj*4 +: 4]) - 9'd1);
      sp_z = ((su_v[sj*14 +: 14] >= 14'd15) ? {7'd0, sp_e} : {12'd0, su_v[sj*14 +: 4]}) << sp_k[2:0];
      sp_z = sp_z | {9'd0, sp_low};
      sp_zv[sj*16 +: 16] = sp_z;
      sp_d = sp_z[0] ? ~{1'b0, sp_z[15:1]} : {1'b0, sp_z[15:1]};   // unzigzag
      sp_sv[sj*16 +: 16] = sp_d;
    end
    if (h_delta) begin
      // s_t = prev + d_0 + ... + d_t (16-bit: exact up to the first symbol out of range)
      sp_sv[15:0] = sp_sv[15:0] + {{8{prev_s[7]}}, prev_s};
      for (sd = 1; sd < EMAX; sd = sd * 2)
        for (sj = EMAX - 1; sj >= sd; sj = sj - 1) sp_sv[sj*16 +: 16] = sp_sv[sj*16 +: 16] + sp_sv[(sj - sd)*16 +: 16];
    end
    for (sj = 0; sj < EMAX; sj = sj + 1) begin
      sp_s = sp_sv[sj*16 +: 16];
      sp_mag = sp_s[15] ? 16'd0 - sp_s : sp_s;
      if (sj < sp_m && (sp_zv[sj*16 +: 16] > {6'd0, h_qmax, 2'b00} || sp_mag > {8'd0, h_qmax})) sp_verr = 1'b1;
      sp_sym[sj*8 +: 8] = sp_s[7:0];
    end
    sp_ps = sp_sym >> ((sp_m[6:0] - 7'd1) * 8);
    sp_lc = (sp_m <= sp_bnd) ? sp_m[6:0] * sp_ka : sp_bnd * sp_ka + (sp_m[6:0] - sp_bnd) * sp_kb;
    sp_uc = (su_pos >> ((sp_m[6:0] - 7'd1) * 14)) + 14'd1;
    sp_ec = sp_wp >> ((sp_m[6:0] - 7'd1) * 14);
    sp_epos = sp_eabs + {18'd0, sp_ec};
    sp_pad = {1'b0, 3'd0 - sp_epos[2:0]};
    if (sp_on && x_v && h_split && err == 4'd0 && !out_done && (!out_valid || out_ready) && st_free) begin
      if (su_tot < sp_m) begin
        // fewer one-bits than symbols in the view: wait, or shorten a zero run
        if (su_vis >= UW) begin
          sp_del = 1'b1;
          su_lf = su_long & (~su_long + 1'b1);         // the first found symbol with v >= 16
          su_a = 14'd0;
          su_b = 14'd0;
          for (sj = 0; sj < EMAX; sj = sj + 1)
            if (su_lf[sj]) begin
              su_a = su_pos[sj*14 +: 14];
              su_b = su_v[sj*14 +: 14];
            end
          if (su_long != {EMAX{1'b0}}) begin
            sp_dp = su_a - su_b + 14'd15;
            sp_dn = (su_b >= 14'd31) ? 5'd16 : su_b[4:0] - 5'd15;
          end else begin
            // the zero-bits after the last one-bit fill the rest of the view
            su_a = (su_tot == 14'd0) ? 14'd0 : (su_pos >> ((su_tot - 14'd1) * 14)) + 14'd1;
            sp_dp = su_a + 14'd15;
            sp_dn = (UW - sp_dp >= 16) ? 5'd16 : UW - sp_dp;
          end
        end
      end else if (sp_lc <= lav && sp_ec + (sp_last ? {10'd0, sp_pad} : 14'd0) <= eav) begin
        // every bit of the beat is here
        sp_bad = sp_epos > {h_rend[28:0], 3'b000};                    // Escape runs past the payload
        if (sp_last)                                                  // padding, nothing left over
          sp_bad = sp_bad || ((sp_epos + 32'd7) >> 3) != h_rend ||
                   ((ewin[sp_ec +: 8] & ((8'd1 << sp_pad) - 8'd1)) != 8'd0);
        if (sp_verr) sp_err = ST_VALUE;
        else if (sp_bad) sp_err = ST_STREAM;
        else sp_go = 1'b1;
      end
    end
  end

  // ---------------------------------------------------------------- end of X
  // X ends once its input has ended and it is decoded, rejected or UNSUP; its
  // status goes out the same cycle as its last beat is registered.
  wire        ds_last = ds_go && (oc + ds_m == (h_raw ? h_plen : h_n));
  // a split-Rice record whose section bounds are wrong, or whose length or CRC
  // is, ends without being decoded (it never sends a beat)
  wire        sp_skip = h_split && h_rdone && (h_rbad || lenbad || crcbad);
  wire        x_fin = x_v && (n_v || in_end) && (err != 4'd0 || unsup || out_done || ds_last || sp_skip) && st_free;
  wire        in_to_n = n_v || (x_v && !x_fin && hdr_fire);         // this beat belongs to N
  wire [32:0] cc_now = cc + (ds_go ? {{(33-WFW-1){1'b0}}, ds_p} : 33'd0);
  reg [3:0] fin_code;
  always @(*) begin
    if (err != 4'd0) fin_code = err;
    else if (lenbad) fin_code = ST_LEN;
    else if (crcbad) fin_code = ST_CRC;
    else if (unsup) fin_code = ST_UNSUP;
    else if (h_split) fin_code = h_rbad ? ST_STREAM : ST_OK;
    else if (cc_now != {1'b0, h_plen} + 33'd24 - {27'd0, h_soff}) fin_code = ST_STREAM;
    else fin_code = ST_OK;
  end

  // X's readers start once its bounds are found and its length and CRC are
  // good; or, in the cycle X ends, for N if N is ready by then (N's first
  // beat then follows X's last one at once when its first words hold it)
  wire          sp_stx = x_v && h_split && h_rdone && !h_rbad && !lenbad && !crcbad && err == 4'd0 && !unsup && !sp_on;
  wire          sp_stn = x_fin && n_v && n_split && (n_bank ? r_done[1] && !r_bad[1] : r_done[0] && !r_bad[0]) &&
                         n_err == 4'd0 && !n_unsup && rx == rec_end && ~crc == i_crcf;
  wire          sp_st = sp_stx || sp_stn;
  wire          s_bank = sp_stn ? n_bank : h_bank;
  wire [NBW6-1:0] s_nbl = ((sp_stn ? n_n[NBW6+5:0] : h_n[NBW6+5:0]) + 63) >> 6;
  wire [31:0]   s_lo = 32'd26 + {{(32-NBW6){1'b0}}, (s_nbl + 1'b1) >> 1};
  wire [31:0]   s_us = s_bank ? r_us1 : r_us0;
  wire [31:0]   s_ue = s_bank ? r_ue1 : r_ue0;
  // start word and byte of each section (shifts when BB is a power of two)
  wire [31:0]   sp_lw, sp_uw, sp_ew, sp_lb, sp_ub, sp_eb;
  generate
    if ((BB & (BB - 1)) == 0) begin : g_bbp2
      assign sp_lw = s_lo >> $clog2(BB);
      assign sp_uw = s_us >> $clog2(BB);
      assign sp_ew = s_ue >> $clog2(BB);
      assign sp_lb = s_lo & (BB - 1);
      assign sp_ub = s_us & (BB - 1);
      assign sp_eb = s_ue & (BB - 1);
    end else begin : g_bbdiv
      assign sp_lw = s_lo / BB;
      assign sp_uw = s_us / BB;
      assign sp_ew = s_ue / BB;
      assign sp_lb = s_lo % BB;
      assign sp_ub = s_us % BB;
      assign sp_eb = s_ue % BB;
    end
  endgenerate
  wire [RAW:0]  b_wa = {b_bank, b_beat[RAW-1:0]};
  speckv_dec_rd #(.DW(DW), .WB(WBL), .RAW(RAW)) u_rl (
    .clk(clk), .rst(rst), .we(b_we), .wa(b_wa), .wd(in_data),
    .st(sp_st), .sbank(s_bank), .sw(sp_lw[RAW-1:0]), .sskip({sp_lb[9:0], 3'b000}),
    .win(lwin), .avail(lav), .cn(sp_go ? sp_lc : 14'd0), .dl(1'b0), .dp(14'd0), .dn(5'd0));
  speckv_dec_rd #(.DW(DW), .WB(WBU), .RAW(RAW)) u_ru (
    .clk(clk), .rst(rst), .we(b_we), .wa(b_wa), .wd(in_data),
    .st(sp_st), .sbank(s_bank), .sw(sp_uw[RAW-1:0]), .sskip({sp_ub[9:0], 3'b000}),
    .win(uwin), .avail(uav), .cn(sp_go ? sp_uc : 14'd0), .dl(sp_del), .dp(sp_dp), .dn(sp_dn));
  speckv_dec_rd #(.DW(DW), .WB(WBE), .RAW(RAW)) u_re (
    .clk(clk), .rst(rst), .we(b_we), .wa(b_wa), .wd(in_data),
    .st(sp_st), .sbank(s_bank), .sw(sp_ew[RAW-1:0]), .sskip({sp_eb[9:0], 3'b000}),
    .win(ewin), .avail(eav), .cn(sp_go ? sp_ec : 14'd0), .dl(1'b0), .dp(14'd0), .dn(5'd0));

  // ---------------------------------------------------------------- window update
  reg [WC*8-1:0]  wn_win;
  reg [WFW:0]     wn_fill, wn_sh, wn_k;
  reg [WFW:0]     wn_push;
  always @(*) begin
    wn_sh = x_fin ? {1'b0, wk} : (ds_go ? ds_p : {(WFW+1){1'b0}});
    wn_win = win >> (wn_sh * 8);
    wn_fill = {1'b0, wfill} - wn_sh;
    wn_push = {(WFW+1){1'b0}};
    if (pu_en && pu_cnt != 33'd0) begin
      wn_win = wn_win | ({{((WC-BB)*8){1'b0}}, pu_data} << (wn_fill * 8));
      wn_push = pu_cnt[WFW:0];
    end
    wn_fill = wn_fill + wn_push;
    // after X ends every byte left is the next record's
    if (x_fin) wn_k = wn_fill;
    else wn_k = {1'b0, wk} - (ds_go ? ds_p : {(WFW+1){1'b0}}) + (in_to_n ? {(WFW+1){1'b0}} : wn_push);
  end

  // header fields of beat 0
  wire [3:0] p_err = !p_ok ? ST_HDR : p_scale_bad ? ST_SCALE : 4'd0;
  wire [7:0] p_qmax = (8'd1 << (p_b[3:0] - 4'd1)) - 8'd1;
  wire [7:0] p_ebeat = (p_dtype == 8'd3) ? BB / 4 : BB / 2;
  wire       hdr_to_x = hdr_fire && !in_to_n;

  always @(posedge clk) begin
    if (rst) begin
      x_v <= 1'b0;
      n_v <= 1'b0;
      x_chk <= 1'b0;
      in_end <= 1'b0;
      i_push <= 1'b0;
      out_valid <= 1'b0;
      out_last <= 1'b0;
      out_data <= {DW{1'b0}};
      out_nbytes <= {NBW{1'b0}};
      st_valid <= 1'b0;
      st_code <= ST_OK;
      win <= {WC*8{1'b0}};
      wfill <= {WFW{1'b0}};
      wk <= {WFW{1'b0}};
      i_buf <= 1'b0;
      i_bank <= 1'b0;
      rs_v <= 1'b0;
      r_done <= 2'b00;
      sp_on <= 1'b0;
    end else begin
      if (out_valid && out_ready) out_valid <= 1'b0;
      if (st_valid && st_ready) st_valid <= 1'b0;
      win <= wn_win;
      wfill <= wn_fill[WFW-1:0];
      wk <= wn_k[WFW-1:0];

      // input side: the newest record
      if (hdr_fire) begin
        rx <= {{(33-NBW){1'b0}}, in_nbytes};
        crc <= crc_upd(32'hFFFFFFFF, c0_word, in_nbytes - 8'd4);
        in_end <= in_last;
        i_plen <= p_plen;
        i_crcf <= p_crc;
        i_push <= p_ok && !p_unsup && !p_scale_bad && !p_split;
        i_buf <= b_hdr;
        i_bank <= ~i_bank;
        i_beat <= {{(RAW+1){1'b0}}, 1'b1};
        i_n <= p_n;
      end else if (body_fire) begin
        rx <= rx + {{(33-NBW){1'b0}}, in_nbytes};
        crc <= crc_upd(crc, in_data, in_nbytes);
        if (in_last) in_end <= 1'b1;
        if (i_beat < PDB) i_beat <= i_beat + 1'b1;
      end

      // split Rice: K bytes, then the section-bound stage one cycle behind
      if (b_fire) begin
        if (b_bank) kreg1 <= kn_next; else kreg0 <= kn_next;
        if (hdr_fire) r_done[b_bank] <= 1'b0;
      end
      rs_v <= b_fire;
      if (b_fire) begin
        rs_d <= in_data;
        rs_nb <= in_nbytes;
        rs_base <= hdr_fire ? 32'd0 : rx[31:0];
        rs_bank <= b_bank;
        rs_first <= hdr_fire;
        rs_last <= in_last;
      end
      if (rs_v) begin
        rs_cnt <= (rs_first ? 16'd0 : rs_cnt) + rs_acc;
        rs_found <= rs_f;
        rs_ue <= rs_fpos;
        rs_bad <= (rs_first ? 1'b0 : rs_bad) || rs_x || rs_lpbad;
        if (rs_last) begin
          r_done[rs_bank] <= 1'b1;
          // K fields, Low padding, K + Low past the payload, fewer than n one-bits, one after the n-th
          r_bad[rs_bank] <= (rs_first ? 1'b0 : rs_bad) || rs_x || rs_lpbad || rs_kbad || rs_us > rs_rend || !rs_f;
          if (rs_bank) begin r_us1 <= rs_us; r_ue1 <= rs_fpos; end
          else begin r_us0 <= rs_us; r_ue0 <= rs_fpos; end
        end
      end

      // decode side: X
      if (h_split && ds_go) begin
        sp_eabs <= sp_epos;
        sp_urem <= sp_urem - {18'd0, sp_uc};
      end
      if (sp_del) sp_urem <= sp_urem - {27'd0, sp_dn};
      if (ds_err != 4'd0) err <= ds_err;
      if (ds_go) begin
        cc <= cc + {{(32-WFW){1'b0}}, ds_p};
        oc <= oc + ds_m;
        rem <= ds_rem;
        lit <= ds_lit;
        runv <= ds_rv;
        prev_s <= ds_ps;
        rk <= rk_n;
        bo <= bo_n;
        out_valid <= 1'b1;
        out_data <= ds_word;
        out_nbytes <= h_raw ? ds_m[NBW-1:0] : ds_m[NBW-1:0] * h_esz;
        out_last <= ds_last;
        if (ds_last) out_done <= 1'b1;
      end

      if (x_fin) begin
        st_valid <= 1'b1;
        st_code <= fin_code;
        sp_on <= 1'b0;
      end
      if (sp_st) begin
        sp_on <= 1'b1;
        sp_eabs <= {s_ue[28:0], 3'b000};
        sp_urem <= (s_ue - s_us) << 3;
      end
      if (x_fin) begin
        x_chk <= 1'b0;
        x_v <= n_v || hdr_fire;
        n_v <= 1'b0;
      end
      if (hdr_fire && in_to_n) begin
        // X stays: keep its length / CRC verdicts, the input side moves on
        x_chk <= 1'b1;
        x_lenbad <= (rx != rec_end);
        x_crcbad <= (~crc != i_crcf);
        n_v <= 1'b1;
      end
      if (hdr_fire && !hdr_to_x) begin
        n_dtype <= p_dtype;
        n_n <= p_n;
        n_plen <= p_plen;
        n_raw <= !p_quant;
        n_delta <= p_flags[1:0] != 2'd0;
        n_rle <= p_flags[3:2] == 2'd1;
        n_rice <= p_flags[3:2] == 2'd2;
        n_split <= p_split;
        n_bank <= b_bank;
        n_w <= p_b[3:0] + 4'd1;
        n_qmax <= p_qmax;
        n_scale <= p_f;
        n_ebeat <= p_ebeat;
        n_esz <= p_esz;
        n_soff <= pu_soff;
        n_err <= p_err;
        n_unsup <= p_ok && p_unsup;
      end
      if (hdr_to_x || (x_fin && n_v)) begin
        // a new X: from beat 0 now, or from N
        if (hdr_to_x) begin
          h_dtype <= p_dtype;
          h_n <= p_n;
          h_plen <= p_plen;
          h_raw <= !p_quant;
          h_delta <= p_flags[1:0] != 2'd0;
          h_rle <= p_flags[3:2] == 2'd1;
          h_rice <= p_flags[3:2] == 2'd2;
          h_split <= p_split;
          h_bank <= b_bank;
          h_w <= p_b[3:0] + 4'd1;
          h_qmax <= p_qmax;
          h_scale <= p_f;
          h_ebeat <= p_ebeat;
          h_esz <= p_esz;
          h_soff <= pu_soff;
          err <= p_err;
          unsup <= p_ok && p_unsup;
          x_v <= 1'b1;
        end else begin
          h_dtype <= n_dtype;
          h_n <= n_n;
          h_plen <= n_plen;
          h_raw <= n_raw;
          h_delta <= n_delta;
          h_rle <= n_rle;
          h_rice <= n_rice;
          h_split <= n_split;
          h_bank <= n_bank;
          h_w <= n_w;
          h_qmax <= n_qmax;
          h_scale <= n_scale;
          h_ebeat <= n_ebeat;
          h_esz <= n_esz;
          h_soff <= n_soff;
          err <= n_err;
          unsup <= n_unsup;
        end
        cc <= 33'd0;
        oc <= 32'd0;
        out_done <= 1'b0;
        rem <= 8'd0;
        lit <= 1'b0;
        runv <= 8'd0;
        prev_s <= 8'd0;
        rk <= 3'd0;
        bo <= 3'd0;
      end
    end
  end
endmodule
`default_nettype wire

// One section reader of the split-Rice decoder (docs/codec.md §18): a copy
// of the record buffer (every beat of a buffered record is written to each
// reader's copy, so the three sections are read at once, one word per cycle
// each) and a bit window over the section from a start byte on. win holds
// avail bits (zeros above), the word the buffer returns this cycle included;
// cn bits are consumed per cycle; dl deletes dn bits at bit dp of the window
// (the Unary reader's collapse of a zero run).
// Words are requested while the window has room for them; a start drops
// whatever the window held and reads from the start byte's word, skipping
// the bytes before it. Reads past the record's words return what the buffer
// holds: the decoder never takes bits from there into an accepted record.
`default_nettype none
module speckv_dec_rd #(
  parameter integer DW = 512,
  // window bits: DW + 2 * (most bits one beat consumes) keeps one beat per
  // cycle (a word is requested while the window has room for it)
  parameter integer WB = 3 * DW,
  parameter integer RAW = 7            // buffer word address bits per bank
) (
  input  wire              clk,
  input  wire              rst,
  input  wire              we,
  input  wire [RAW:0]      wa,         // {bank, word}
  input  wire [DW-1:0]     wd,
  input  wire              st,
  input  wire              sbank,
  input  wire [RAW-1:0]    sw,         // start word
  input  wire [12:0]       sskip,      // start bit in that word (byte offset * 8)
  output wire [WB-1:0]     win,
  output wire [13:0]       avail,
  input  wire [13:0]       cn,
  input  wire              dl,
  input  wire [13:0]       dp,
  input  wire [4:0]        dn
);
  reg            bank, infl, first;
  reg  [RAW-1:0] wp;
  reg  [12:0]    skip;
  reg  [WB-1:0]  w_r;                 // the window before this cycle's word
  reg  [13:0]    a_r;
  wire [DW-1:0]  rd;
  // this cycle: the word that arrives is appended, then bits are consumed or deleted
  wire [12:0]    sk = first ? skip : 13'd0;
  wire [DW-1:0]  rds = rd >> sk;
  assign win = infl ? (w_r | ({{(WB-DW){1'b0}}, rds} << a_r)) : w_r;
  assign avail = a_r + (infl ? (DW - {1'b0, sk}) : 14'd0);
  wire [13:0]    a2 = avail - cn - (dl ? {9'd0, dn} : 14'd0);
  wire [WB-1:0]  lowm = ~({WB{1'b1}} << dp);
  wire [WB-1:0]  w2 = dl ? ((win & lowm) | ((win >> dn) & ~lowm)) : (win >> cn);
  // room for the word requested now, whatever the next cycle consumes
  wire           iss = !st && ({1'b0, a2} + DW <= WB);
  speckv_sdp_ram #(.W(DW), .D(2 << RAW), .AW(RAW + 1)) u_buf (
    .clk(clk), .we(we), .wa(wa), .wd(wd), .re(st || iss), .ra(st ? {sbank, sw} : {bank, wp}), .rd(rd));

  always @(posedge clk) begin
    if (rst) begin
      w_r <= {WB{1'b0}};
      a_r <= 14'd0;
      infl <= 1'b0;
      first <= 1'b0;
    end else if (st) begin
      w_r <= {WB{1'b0}};
      a_r <= 14'd0;
      bank <= sbank;
      wp <= sw + 1'b1;
      skip <= sskip;
      first <= 1'b1;
      infl <= 1'b1;
    end else begin
      w_r <= w2;
      a_r <= a2;
      if (infl) first <= 1'b0;
      infl <= iss;
      if (iss) wp <= wp + 1'b1;
    end
  end
endmodule
`default_nettype wire
