// SPDX-License-Identifier: Apache-2.0
// speckv KV codec: record decoder of the fixed-width packed entropy
// (docs/codec.md §19: flags bits 2-4 = 4). Same stream interface and status
// codes as speckv_dec; the top sends it the records whose flags byte says
// entropy 4 and it validates them completely (§8 with the widened entropy
// field, §19.1 payload length, §19.5 field and padding checks, CRC32C).
//
// Written for synthesis: the record buffer is RAM (speckv_sdp_ram, NB banks
// of WPB words, five copies: two read the stream window, three the pair
// window), the per-element arithmetic a fixed-width pipelined datapath.
//
//   IN     record beats into the bank (one word per beat: beats are BB bytes
//          but the last), CRC32C over bytes 0..19 and 24.., the header from
//          the first beat, the first E pairs into the bank's head register,
//          the index of the first bad (scale, zero point) pair (§19.5: s16
//          sign 0 and exponent != 31, z16 exponent != 31).
//   END    (the cycle after the last beat) G = n / C, the header, length,
//          CRC, payload length, padding and pair checks: the record's status.
//   OUT    four stages, one page beat per cycle, stalled as a whole by the
//          output:
//     O0   element index i0, (i0 mod C, i0 / C) and the group of each of the
//          E elements (a chain of E wrap-around increments), the stream bit
//          address and the word address of the pair window; RAM reads.
//     O1   q = the b-bit slices of two stream words at the bit offset; the
//          pair of each element: groups < E from the head register, the
//          others from three words of pairs (channel groups: c0 .. c0+E-1;
//          token groups: at most ceil((E-1)/C) + 1 groups, C >= 2 in a valid
//          record).
//     O2   q * ms << (es - 1) +- mz << (ez - 1): q * sf + zf exactly, in
//          units of 2^-24, magnitude < 2^49 (s16, z16 are FP16).
//     O3   normalise, RNE to 24 bits (y = fma(q, sf, zf), one rounding; never
//          subnormal or infinite), then FP32 / BF16 RNE / FP16 RNE with
//          saturation (§19.5); the status goes with the last beat (a rejected
//          record: the status alone).
// A bank is free once its record's last token has left O1 (the head register
// is read there). OUT takes the next record in the cycle it issues the last
// beat of one, so records whose input takes no more beats than their page
// leave one page beat per cycle.
// A valid record whose page is larger than MAX_BYTES (it does not fit the
// record buffer) ends with UNSUP after the header, length and CRC checks.
`default_nettype none
module speckv_pdec #(
  parameter integer DW = 512,
  parameter integer MODES = 39,
  parameter integer MAX_BYTES = 4096
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
  localparam integer EMAX = BB / 2;               // E: elements per beat (16-bit dtypes; FP32: E / 2)
  localparam integer PW = BB / 4;                 // pairs per word
  localparam integer NB = 4;                      // record banks (records in flight)
  localparam integer RW = (24 + MAX_BYTES + BB - 1) / BB;   // words of the largest record decoded
  localparam integer WPB = RW + 3;                // words per bank (the windows read up to 2 past the end)
  localparam integer AW = $clog2(NB * WPB);
  localparam integer IW = $clog2(MAX_BYTES + 1) + 1;        // element / group index width
  localparam integer POW2 = (DW & (DW - 1)) == 0;
  localparam [3:0] ST_OK = 4'd0, ST_HDR = 4'd1, ST_LEN = 4'd2, ST_CRC = 4'd3, ST_SCALE = 4'd4,
                   ST_STREAM = 4'd5, ST_VALUE = 4'd6, ST_UNSUP = 4'd7;

  `include "speckv_codec_fn.vh"

  // ------------------------------------------------------------------ record RAM
  // word w of bank b at b * WPB + w (w < WPB: the callers keep it so)
  function automatic [AW-1:0] wad(input [1:0] b2, input [31:0] w);
    reg [31:0] a;
    begin
      a = ((b2 == 2'd0) ? 32'd0 : (b2 == 2'd1) ? WPB : (b2 == 2'd2) ? 2 * WPB : 3 * WPB) + w;
      wad = a[AW-1:0];
    end
  endfunction
  wire          r_we;
  wire [AW-1:0] r_wa;
  wire          o_re;
  wire [AW-1:0] ra_s0, ra_s1, ra_p0, ra_p1, ra_p2;
  wire [DW-1:0] rd_s0, rd_s1, rd_p0, rd_p1, rd_p2;
  speckv_sdp_ram #(.W(DW), .D(NB * WPB), .AW(AW)) u_rs0 (.clk(clk), .we(r_we), .wa(r_wa), .wd(in_data),
    .re(o_re), .ra(ra_s0), .rd(rd_s0));
  speckv_sdp_ram #(.W(DW), .D(NB * WPB), .AW(AW)) u_rs1 (.clk(clk), .we(r_we), .wa(r_wa), .wd(in_data),
    .re(o_re), .ra(ra_s1), .rd(rd_s1));
  speckv_sdp_ram #(.W(DW), .D(NB * WPB), .AW(AW)) u_rp0 (.clk(clk), .we(r_we), .wa(r_wa), .wd(in_data),
    .re(o_re), .ra(ra_p0), .rd(rd_p0));
  speckv_sdp_ram #(.W(DW), .D(NB * WPB), .AW(AW)) u_rp1 (.clk(clk), .we(r_we), .wa(r_wa), .wd(in_data),
    .re(o_re), .ra(ra_p1), .rd(rd_p1));
  speckv_sdp_ram #(.W(DW), .D(NB * WPB), .AW(AW)) u_rp2 (.clk(clk), .we(r_we), .wa(r_wa), .wd(in_data),
    .re(o_re), .ra(ra_p2), .rd(rd_p2));

  // ------------------------------------------------------------------ per bank
  reg [NB*32*EMAX-1:0] hd;             // the first E pairs of the record (bytes 24 .. 24 + 4E - 1)
  reg [NB*4-1:0]    m_code;
  reg [NB*32-1:0]   m_n, m_C, m_obytes, m_sbit;
  reg [NB*2-1:0]    m_grp;
  reg [NB*8-1:0]    m_dtype;
  reg [NB*4-1:0]    m_bits;

  // ------------------------------------------------------------------ IN
  reg [7:0]  startI, doneI, doneF, doneO;   // records: input ended, status known, freed, issued (mod 256)
  reg        i_in;
  reg [31:0] i_len, i_crc, i_fb, i_beat;
  reg        i_fbv;                 // a bad pair seen; i_fb its index (the first)
  reg [7:0]  i_lb;                  // last record byte so far
  reg [191:0] i_hdr;
  wire [1:0] i_bank = startI[1:0];
  wire [7:0] inflight = startI - doneF;
  wire       in_fire = in_valid && in_ready;
  assign in_ready = i_in || (inflight < NB);
  wire       i_first = !i_in;
  wire [31:0] i_b = i_first ? 32'd0 : i_beat;
  assign r_we = in_fire && i_b < WPB;
  assign r_wa = wad(i_bank, i_b);

  // END stage registers
  reg        e_v;
  reg [1:0]  e_bank;
  reg [31:0] e_len, e_crc, e_fb;
  reg        e_fbv;
  reg [7:0]  e_lb;
  reg [191:0] e_hdr;

  integer ja, ka, kb, s, jc, jd, je, jf, jg;
  reg [31:0] t, fb, len0;
  reg        fbv, bad;
  reg [15:0] s16a, z16a, s16e, z16e;
  reg [7:0]  lb;

  always @(posedge clk) begin
    if (rst) begin
      startI <= 8'd0;
      i_in <= 1'b0;
      i_len <= 32'd0;
      i_beat <= 32'd0;
      e_v <= 1'b0;
    end else begin
      e_v <= 1'b0;
      if (in_fire) begin
        len0 = i_first ? 32'd0 : i_len;
        t = i_first ? 32'hFFFFFFFF : i_crc;
        fbv = i_first ? 1'b0 : i_fbv;
        fb = i_first ? 32'd0 : i_fb;
        lb = i_lb;
        for (ja = 0; ja < BB; ja = ja + 1)
          if (ja < in_nbytes && (i_b != 32'd0 || ja < 20 || ja >= 24)) begin
            t = t ^ {24'd0, in_data[8*ja +: 8]};
            for (ka = 0; ka < 8; ka = ka + 1)
              t = t[0] ? ((t >> 1) ^ 32'h82F63B78) : (t >> 1);
          end
        for (ja = 0; ja < BB; ja = ja + 1)
          if (ja + 1 == in_nbytes) lb = in_data[8*ja +: 8];
        // the first bad pair of the beat (pair p at bytes 24 + 4p .. 27 + 4p)
        bad = 1'b0;
        for (s = PW - 1; s >= 0; s = s - 1) begin
          s16a = in_data[32*s +: 16];
          z16a = in_data[32*s + 16 +: 16];
          if ((i_b != 32'd0 || s >= 6) && 4 * s < in_nbytes &&
              (s16a[15] || s16a[14:10] == 5'd31 || z16a[14:10] == 5'd31)) begin
            bad = 1'b1;
            if (!fbv) fb = i_b * PW + s - 6;
          end
        end
        if (bad) fbv = 1'b1;
        if (i_first) i_hdr <= in_data[191:0];
        // head register: record bytes 24 .. 24 + 4E - 1 (beats 0, 1, 2)
        // (constant indices per bank: a computed index into hd would be a shifter per byte)
        for (ka = 0; ka < NB; ka = ka + 1)
          if (i_bank == ka) begin
            if (i_b == 32'd0) hd[ka * 32 * EMAX +: 8 * (BB - 24)] <= in_data[DW-1:192];
            if (i_b == 32'd1) hd[ka * 32 * EMAX + 8 * (BB - 24) +: DW] <= in_data;
            if (i_b == 32'd2) hd[ka * 32 * EMAX + 8 * (2 * BB - 24) +: 192] <= in_data[191:0];
          end
        i_crc <= t;
        i_fb <= fb;
        i_fbv <= fbv;
        i_lb <= lb;
        i_len <= len0 + in_nbytes;
        i_beat <= i_b + 32'd1;
        i_in <= !in_last;
        if (in_last) begin
          e_v <= 1'b1;
          e_bank <= i_bank;
          e_len <= len0 + in_nbytes;
          e_crc <= ~t;
          e_fb <= fb;
          e_fbv <= fbv;
          e_lb <= lb;
          e_hdr <= i_first ? in_data[191:0] : i_hdr;
          startI <= startI + 8'd1;
        end
      end
    end
  end

  // ------------------------------------------------------------------ END (§8, §19.1, §19.5)
  wire [31:0] en = {e_hdr[8*11 +: 8], e_hdr[8*10 +: 8], e_hdr[8*9 +: 8], e_hdr[8*8 +: 8]};
  wire [31:0] eC = {16'd0, e_hdr[8*13 +: 8], e_hdr[8*12 +: 8]};
  wire [31:0] eCd = (eC == 32'd0) ? 32'd1 : eC;
  wire [31:0] eq = en / eCd;        // the one divider (once per record)
  wire [31:0] er = en - eq * eCd;
  reg [31:0] n, C, G, plen, raw, need, esz, kk, nb8;
  reg [7:0]  dtype, b5, b6, b7;
  reg [3:0]  code, bits;
  reg        hok;
  always @(posedge clk) begin
    if (rst) begin
      doneI <= 8'd0;
    end else if (e_v) begin
      kk = e_len;
      b7 = e_hdr[8*7 +: 8];
      n = en;
      C = eC;
      dtype = e_hdr[8*4 +: 8];
      b5 = e_hdr[8*5 +: 8];
      b6 = e_hdr[8*6 +: 8];
      bits = b5 > 8'd8 ? 4'd0 : b5[3:0];
      esz = (dtype == 8'd3) ? 32'd4 : (dtype == 8'd0) ? 32'd1 : 32'd2;
      plen = {e_hdr[8*19 +: 8], e_hdr[8*18 +: 8], e_hdr[8*17 +: 8], e_hdr[8*16 +: 8]};
      hok = kk >= 32'd24 && e_hdr[8*0 +: 8] == 8'h53 && e_hdr[8*1 +: 8] == 8'h4B && e_hdr[8*2 +: 8] == 8'd1 && e_hdr[8*3 +: 8] < MODES &&
            e_hdr[8*3 +: 8] != 8'd0 && dtype >= 8'd1 && dtype <= 8'd3 && e_hdr[8*14 +: 8] == 8'd0 && e_hdr[8*15 +: 8] == 8'd0 &&
            n != 32'd0 && n <= 32'h01000000 && C != 32'd0 && er == 32'd0 &&
            b5 >= 8'd3 && b5 <= 8'd8 && b6 <= 8'd2 && b7[1:0] == 2'd0 && b7[7:5] == 3'd0 &&
            b7[4:2] == 3'd4;
      raw = n * esz;
      G = (b6 == 8'd0) ? 32'd1 : (b6 == 8'd1) ? C : eq;
      if (hok && (plen < 32'd2 * G || plen > raw)) hok = 1'b0;
      nb8 = n * {28'd0, bits};
      need = 32'd4 * G + ((nb8 + 32'd7) >> 3);
      code = ST_OK;
      if (!hok) code = ST_HDR;
      else if (plen > kk - 32'd24 || kk != plen + 32'd24) code = ST_LEN;
      else if (e_crc != {e_hdr[8*23 +: 8], e_hdr[8*22 +: 8], e_hdr[8*21 +: 8], e_hdr[8*20 +: 8]}) code = ST_CRC;
      else if (raw > MAX_BYTES) code = ST_UNSUP;
      else if (plen != need) code = ST_STREAM;
      else if (nb8[2:0] != 3'd0 && (e_lb >> nb8[2:0]) != 8'd0) code = ST_STREAM;
      else if (e_fbv && e_fb < G) code = ST_SCALE;
      for (kb = 0; kb < NB; kb = kb + 1)
        if (e_bank == kb) begin
          m_code[kb*4 +: 4] <= code;
          m_n[kb*32 +: 32] <= n;
          m_C[kb*32 +: 32] <= C;
          m_obytes[kb*32 +: 32] <= raw;
          m_sbit[kb*32 +: 32] <= 32'd8 * (32'd24 + 32'd4 * G);
          m_dtype[kb*8 +: 8] <= dtype;
          m_bits[kb*4 +: 4] <= bits;
          m_grp[kb*2 +: 2] <= b6[1:0];
        end
      doneI <= doneI + 8'd1;
    end
  end

  // ------------------------------------------------------------------ OUT
  // the whole OUT pipeline moves when the output registers can take a token
  wire adv = (!out_valid || out_ready) && (!st_valid || st_ready);
  assign o_re = adv;

  // O0 state
  reg        o_act;
  reg [1:0]  o_bank;
  reg [31:0] o_pos, o_sbit;
  reg [IW-1:0] o_i, o_r, o_t;

  wire [3:0]  o_code = m_code[o_bank*4 +: 4];
  wire [31:0] o_n = m_n[o_bank*32 +: 32];
  wire [IW-1:0] o_C = m_C[o_bank*32 +: IW];
  wire [31:0] o_ob = m_obytes[o_bank*32 +: 32];
  wire [1:0]  o_grp = m_grp[o_bank*2 +: 2];
  wire [3:0]  o_bits = m_bits[o_bank*4 +: 4];
  wire [7:0]  o_dt = m_dtype[o_bank*8 +: 8];
  wire        o_f32 = o_dt == 8'd3;
  wire [31:0] o_epb = o_f32 ? EMAX / 2 : EMAX;

  // the group of each element of the beat: (i mod C, i / C) stepped E times
  reg [IW-1:0] cr [0:EMAX];
  reg [IW-1:0] ct [0:EMAX];
  reg [EMAX*IW-1:0] o_g;
  always @* begin
    cr[0] = o_r;
    ct[0] = o_t;
    for (jc = 0; jc < EMAX; jc = jc + 1) begin
      if (cr[jc] + 1'b1 == o_C) begin
        cr[jc+1] = {IW{1'b0}};
        ct[jc+1] = ct[jc] + 1'b1;
      end else begin
        cr[jc+1] = cr[jc] + 1'b1;
        ct[jc+1] = ct[jc];
      end
      o_g[jc*IW +: IW] = (o_grp == 2'd1) ? cr[jc] : (o_grp == 2'd2) ? ct[jc] : {IW{1'b0}};
    end
  end
  wire [IW-1:0] o_r_nx = o_f32 ? cr[EMAX/2] : cr[EMAX];
  wire [IW-1:0] o_t_nx = o_f32 ? ct[EMAX/2] : ct[EMAX];
  // stream window: words sbit / DW and the next; pair window: the word of pair (gbase + 6) and the next two
  wire [IW-1:0] o_gb = (o_grp == 2'd1) ? o_r : (o_grp == 2'd2) ? o_t : {IW{1'b0}};
  wire [31:0] o_pu = {{(32-IW){1'b0}}, o_gb} + 32'd6;     // in pairs from the record start
  wire [31:0] o_sw = POW2 ? (o_sbit >> $clog2(DW)) : (o_sbit / DW);
  wire [31:0] o_so = POW2 ? (o_sbit & (DW - 1)) : (o_sbit % DW);
  wire [31:0] o_pw = POW2 ? (o_pu >> $clog2(PW)) : (o_pu / PW);
  wire [31:0] o_po = POW2 ? (o_pu & (PW - 1)) : (o_pu % PW);
  assign ra_s0 = wad(o_bank, o_sw);
  assign ra_s1 = wad(o_bank, o_sw + 32'd1);
  assign ra_p0 = wad(o_bank, o_pw);
  assign ra_p1 = wad(o_bank, o_pw + 32'd1);
  assign ra_p2 = wad(o_bank, o_pw + 32'd2);
  wire o_last = o_pos + BB >= o_ob;
  wire o_rej = o_code != ST_OK;
  wire ofin = adv && o_act && (o_rej || o_last);
  wire [7:0] nextO = doneO + {7'd0, ofin};

  // O1 token
  reg        s1_v, s1_rej, s1_last, s1_f32;
  reg [3:0]  s1_code, s1_bits;
  reg [7:0]  s1_dt;
  reg [1:0]  s1_bank;
  reg [NBW-1:0] s1_nb;
  reg [$clog2(DW)-1:0] s1_so;
  reg [7:0]  s1_po;
  reg [IW-1:0] s1_gb;
  reg [EMAX*IW-1:0] s1_g;
  reg [EMAX-1:0] s1_lv;               // lane holds an element (< n)
  // O2 token
  reg        s2_v, s2_rej, s2_last, s2_f32;
  reg [3:0]  s2_code;
  reg [7:0]  s2_dt;
  reg [NBW-1:0] s2_nb;
  reg [EMAX-1:0] s2_lv;
  reg [8*EMAX-1:0] s2_q;
  reg [32*EMAX-1:0] s2_sz;
  // O3 token
  reg        s3_v, s3_rej, s3_last, s3_f32;
  reg [3:0]  s3_code;
  reg [7:0]  s3_dt;
  reg [NBW-1:0] s3_nb;
  reg [EMAX-1:0] s3_lv, s3_neg;
  reg [49*EMAX-1:0] s3_m;

  wire s1_fin = s1_v && (s1_rej || s1_last);

  // O1: q and the pair of each element
  wire [2*DW-1:0] sw2 = {rd_s1, rd_s0} >> s1_so;
  wire [3*DW-1:0] pw3 = {rd_p2, rd_p1, rd_p0};
  wire [32*EMAX-1:0] hdb = hd[s1_bank * 32 * EMAX +: 32 * EMAX];
  reg [8*EMAX-1:0]  x_q;
  reg [32*EMAX-1:0] x_sz;
  reg [IW-1:0] g;
  reg [IW+1:0] pi;
  always @* begin
    for (jd = 0; jd < EMAX; jd = jd + 1) begin
      case (s1_bits)
        4'd3: x_q[8*jd +: 8] = {5'd0, sw2[3*jd +: 3]};
        4'd4: x_q[8*jd +: 8] = {4'd0, sw2[4*jd +: 4]};
        4'd5: x_q[8*jd +: 8] = {3'd0, sw2[5*jd +: 5]};
        4'd6: x_q[8*jd +: 8] = {2'd0, sw2[6*jd +: 6]};
        4'd7: x_q[8*jd +: 8] = {1'd0, sw2[7*jd +: 7]};
        default: x_q[8*jd +: 8] = sw2[8*jd +: 8];
      endcase
      g = s1_g[jd*IW +: IW];
      pi = {2'd0, g} - {2'd0, s1_gb} + {{(IW-6){1'b0}}, s1_po};
      if (g < EMAX) x_sz[32*jd +: 32] = hdb[32*g[$clog2(EMAX)-1:0] +: 32];
      else x_sz[32*jd +: 32] = pw3[32*pi[$clog2(3*PW)-1:0] +: 32];
    end
  end

  // O2: q * sf + zf in units of 2^-24, sign and magnitude
  reg [48:0] xm [0:EMAX-1];
  reg [EMAX-1:0] xneg;
  reg [4:0]  es, ez;
  reg [10:0] ms, mz;
  reg [18:0] pq;
  reg [48:0] P, Z;
  always @* begin
    for (je = 0; je < EMAX; je = je + 1) begin
      s16e = s2_sz[32*je +: 16];
      z16e = s2_sz[32*je + 16 +: 16];
      es = s16e[14:10];
      ez = z16e[14:10];
      ms = {es != 5'd0, s16e[9:0]};
      mz = {ez != 5'd0, z16e[9:0]};
      pq = s2_q[8*je +: 8] * ms;
      P = {30'd0, pq} << ((es == 5'd0) ? 5'd0 : es - 5'd1);
      Z = {38'd0, mz} << ((ez == 5'd0) ? 5'd0 : ez - 5'd1);
      if (!z16e[15]) begin
        xm[je] = P + Z;
        xneg[je] = 1'b0;
      end else if (P >= Z) begin
        xm[je] = P - Z;
        xneg[je] = 1'b0;
      end else begin
        xm[je] = Z - P;
        xneg[je] = 1'b1;
      end
    end
  end

  // O3: binary32 (RNE) of (-1)^neg * m * 2^-24, m < 2^49, then the record dtype
  function automatic [31:0] fx_to_f32(input neg, input [48:0] m);
    reg [63:0] v;
    reg [5:0] lz;
    reg [24:0] sg;
    reg [7:0] ex;
    reg up;
    begin
      v = {m, 15'd0};               // bit 63 = 2^24
      lz = 6'd0;
      if (v[63:32] == 32'd0) begin v = v << 32; lz = lz + 6'd32; end
      if (v[63:48] == 16'd0) begin v = v << 16; lz = lz + 6'd16; end
      if (v[63:56] == 8'd0)  begin v = v << 8;  lz = lz + 6'd8;  end
      if (v[63:60] == 4'd0)  begin v = v << 4;  lz = lz + 6'd4;  end
      if (v[63:62] == 2'd0)  begin v = v << 2;  lz = lz + 6'd2;  end
      if (v[63] == 1'b0)     begin v = v << 1;  lz = lz + 6'd1;  end
      up = v[39] && (v[38:0] != 39'd0 || v[40]);
      sg = {1'b0, v[63:40]} + {24'd0, up};
      ex = 8'd151 - {2'd0, lz};      // 2^(24 - lz) biased: 127 + 24 - lz
      if (sg[24]) ex = ex + 8'd1;   // rounded up to the next power of two (sg[23:0] = 0)
      fx_to_f32 = (m == 49'd0) ? 32'd0 : {neg, ex, sg[22:0]};
    end
  endfunction
  reg [DW-1:0] ob;
  reg [31:0] y;
  always @* begin
    ob = {DW{1'b0}};
    for (jf = 0; jf < EMAX; jf = jf + 1) begin
      y = s3_lv[jf] ? fx_to_f32(s3_neg[jf], s3_m[49*jf +: 49]) : 32'd0;
      if (s3_f32) begin
        if (jf < EMAX / 2) ob[32*jf +: 32] = y;
      end else if (s3_dt == 8'd2) ob[16*jf +: 16] = fp32_to_bf16(y);
      else ob[16*jf +: 16] = fp32_to_fp16_sat(y);
    end
  end

  always @(posedge clk) begin
    if (rst) begin
      doneO <= 8'd0;
      doneF <= 8'd0;
      o_act <= 1'b0;
      s1_v <= 1'b0;
      s2_v <= 1'b0;
      s3_v <= 1'b0;
      out_valid <= 1'b0;
      out_last <= 1'b0;
      out_nbytes <= {NBW{1'b0}};
      out_data <= {DW{1'b0}};
      st_valid <= 1'b0;
      st_code <= ST_OK;
    end else begin
      if (out_valid && out_ready) begin
        out_valid <= 1'b0;
        out_last <= 1'b0;
      end
      if (st_valid && st_ready) st_valid <= 1'b0;
      if (adv) begin
        // O3 -> output registers
        if (s3_v) begin
          if (s3_rej) begin
            st_code <= s3_code;
            st_valid <= 1'b1;
          end else begin
            out_data <= ob;
            out_nbytes <= s3_nb;
            out_valid <= 1'b1;
            out_last <= s3_last;
            if (s3_last) begin
              st_code <= ST_OK;             // the status goes with the last beat
              st_valid <= 1'b1;
            end
          end
        end
        // O2 -> O3
        s3_v <= s2_v;
        s3_rej <= s2_rej;
        s3_last <= s2_last;
        s3_f32 <= s2_f32;
        s3_code <= s2_code;
        s3_dt <= s2_dt;
        s3_nb <= s2_nb;
        s3_lv <= s2_lv;
        s3_neg <= xneg;
        for (jg = 0; jg < EMAX; jg = jg + 1) s3_m[49*jg +: 49] <= xm[jg];
        // O1 -> O2
        s2_v <= s1_v;
        s2_rej <= s1_rej;
        s2_last <= s1_last;
        s2_f32 <= s1_f32;
        s2_code <= s1_code;
        s2_dt <= s1_dt;
        s2_nb <= s1_nb;
        s2_lv <= s1_lv;
        s2_q <= x_q;
        s2_sz <= x_sz;
        if (s1_fin) doneF <= doneF + 8'd1;
        // O0 -> O1
        s1_v <= o_act;
        s1_rej <= o_rej;
        s1_last <= o_last;
        s1_f32 <= o_f32;
        s1_code <= o_code;
        s1_bits <= o_bits;
        s1_dt <= o_dt;
        s1_bank <= o_bank;
        s1_nb <= (o_ob - o_pos >= BB) ? BB[NBW-1:0] : o_ob[NBW-1:0] - o_pos[NBW-1:0];
        s1_so <= o_so[$clog2(DW)-1:0];
        s1_po <= o_po[7:0];
        s1_gb <= o_gb;
        s1_g <= o_g;
        for (jg = 0; jg < EMAX; jg = jg + 1)
          s1_lv[jg] <= jg < o_epb && {{(32-IW){1'b0}}, o_i} + jg < o_n;
        if (o_act) begin
          o_pos <= o_pos + BB;
          o_i <= o_i + o_epb[IW-1:0];
          o_r <= o_r_nx;
          o_t <= o_t_nx;
          o_sbit <= o_sbit + o_epb * {28'd0, o_bits};
        end
      end
      if (ofin) begin
        o_act <= 1'b0;
        doneO <= nextO;
      end
      if ((!o_act || ofin) && doneI != nextO) begin
        o_act <= 1'b1;
        o_bank <= nextO[1:0];
        o_pos <= 32'd0;
        o_i <= {IW{1'b0}};
        o_r <= {IW{1'b0}};
        o_t <= {IW{1'b0}};
        o_sbit <= m_sbit[nextO[1:0]*32 +: 32];
      end
    end
  end
endmodule
`default_nettype wire
